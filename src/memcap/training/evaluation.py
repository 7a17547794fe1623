"""Full-data evaluation of every replica: loss, memorized examples, accuracy and KL."""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor, nn

from memcap.training.data import ReplicaData
from memcap.training.engine import Step
from memcap.training.objectives import Objective, example_correct, example_losses

CUDA_ROWS = 2**18  # replica × example rows of one evaluation chunk on a GPU


@torch.no_grad()
def evaluate(
    model: nn.Module,
    data: ReplicaData,
    objective: Objective,
    regression_tol: float | None,
    step: Step | None = None,
    chunk: int = 4096,
) -> dict[str, Tensor]:
    """Full-data loss, memorized count, accuracy and KL of every replica, in example chunks
    (on a GPU at most :data:`CUDA_ROWS` replica-examples a chunk), with ``step``'s outputs
    (None: the model's own forward)."""
    loss = torch.zeros(data.replicas, device=data.sizes.device)
    correct = torch.zeros_like(loss)
    for inputs, targets, valid in chunks(data, chunk):
        outputs = model(*inputs) if step is None else step.outputs(model, inputs)
        loss += (example_losses(outputs, targets, objective) * valid).sum(1)
        correct += (example_correct(outputs, targets, objective, regression_tol) * valid).sum(1)
    sizes = data.sizes.float()
    mean_loss = loss / sizes
    kl = mean_loss if objective == "distribution" else torch.full_like(loss, float("nan"))
    return {"loss": mean_loss, "memorized": correct, "accuracy": correct / sizes, "kl": kl}


def chunks(
    data: ReplicaData, chunk: int = 4096
) -> Iterator[tuple[tuple[Tensor, ...], Tensor, Tensor]]:
    """Inputs (:meth:`~memcap.training.data.ReplicaData.examples`), targets and valid-example
    weights (R, B) of every example chunk an evaluation reads, in order; on a GPU at most
    :data:`CUDA_ROWS` replica-examples a chunk."""
    mask = data.mask().float()
    t_max = data.targets.shape[1]
    if mask.device.type == "cuda":  # a GPU's memory bounds the chunk's intermediates
        chunk = min(chunk, max(256, CUDA_ROWS // data.replicas))
    for start in range(0, t_max, chunk):
        rows = slice(start, min(t_max, start + chunk))
        yield data.examples(rows), data.targets[:, rows], mask[:, rows]
