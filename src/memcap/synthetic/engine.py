"""Paper A's fast training step: :class:`~memcap.synthetic.model.ReplicaMHA` with folded weights.

The step runs parameters to loss as one autograd node (:mod:`memcap.synthetic.folded`, the
loss inside it: :mod:`memcap.training.objectives`), with heads of replicas that read the
same inputs stacked (:mod:`memcap.synthetic.head_slots`). It reads ``ReplicaMHA``'s
parameters and buffers; whether it computes that model's function is checked, not assumed:
:func:`memcap.training.engine.choose_step` compares it with the model's own forward and
autograd on the run's first batch, so an edited ``forward`` or a subclass that changes the
model trains through the reference (and says so in the log).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from memcap.synthetic.folded import folded_logits, folded_loss
from memcap.synthetic.head_slots import SlotCache
from memcap.synthetic.model import ReplicaMHA
from memcap.training.config import TrainConfig
from memcap.training.engine import AutogradStep
from memcap.training.objectives import ExampleLoss, Objective, example_losses, widened


class FastStep(AutogradStep):
    """Folded weights, stacked heads and the fused loss; under bfloat16 the folded logits
    with the loss taken in float32."""

    name = "fast"

    def __init__(self, cfg: TrainConfig, device: torch.device) -> None:
        super().__init__(cfg, device)
        self.slots = SlotCache()  # full batches pass the same tensors every step
        # mini-batches: every replica draws its own stream, so no two read the same inputs
        self.step_slots = SlotCache(separate=True) if cfg.batch_size is not None else self.slots
        self._bf16 = cfg.precision == "bf16"  # the run's route, whatever dtype the check runs

    @staticmethod
    def unsupported(model: nn.Module, objective: Objective, cfg: TrainConfig) -> str | None:
        if not isinstance(model, ReplicaMHA):
            return f"{type(model).__name__} is no ReplicaMHA, the model it is derived for"
        if objective not in ("classification", "regression"):
            return f"objective '{objective}'"
        return None

    def outputs(self, model: nn.Module, inputs: tuple[Tensor, ...]) -> Tensor:
        return self._decoded(folded_logits(model, *inputs, self.slots), model)

    @staticmethod
    def _decoded(decoded: Tensor, model: nn.Module) -> Tensor:
        return decoded.squeeze(-1) if model.classes is None else decoded

    def loss(
        self,
        model: nn.Module,
        inputs: tuple[Tensor, ...],
        targets: Tensor,
        weights: Tensor,
        objective: Objective,
    ) -> tuple[Tensor, Tensor]:
        """The fused loss inside the folded node; under bf16 the loss is taken in float32 (or
        wider) from the folded logits."""
        if (objective == "classification") != (model.classes is not None):
            raise ValueError(
                f"objective '{objective}' does not fit a model with classes={model.classes}"
            )
        if self._bf16 or next(model.parameters()).dtype in (torch.bfloat16, torch.float16):
            outputs = widened(self._decoded(folded_logits(model, *inputs, self.step_slots), model))
            return (example_losses(outputs, targets, objective) * weights).sum(1), outputs
        loss = ExampleLoss(targets, weights, classification=objective == "classification")
        per_replica, decoded = folded_loss(model, *inputs, loss, self.step_slots)
        return per_replica, self._decoded(decoded, model)
