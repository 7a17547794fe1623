"""The training step: a replica-batched model's forward, the loss, and autograd's backward.

A :class:`Step` computes a replica-batched model's outputs (evaluations) and one training
step's per-replica loss with every parameter's gradient. :class:`AutogradStep` is the one
step of both papers' experiments: the model's own ``forward``, the loss of
:mod:`memcap.training.objectives` and autograd's backward, optionally through
``torch.compile``. What trains is the model module as written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch
from torch import Tensor, nn

from memcap.training.config import TrainConfig
from memcap.training.objectives import Objective, example_losses, widened

# (model, inputs, targets, weights, objective) -> (per-replica loss (R,), outputs)
LossFunction = Callable[
    [nn.Module, tuple[Tensor, ...], Tensor, Tensor, Objective], tuple[Tensor, Tensor]
]


class Step(Protocol):
    """How a replica-batched model computes its outputs and a training step."""

    name: str

    def outputs(self, model: nn.Module, inputs: tuple[Tensor, ...]) -> Tensor:
        """The model's outputs (R, B, ...) for ``inputs`` (evaluations: no gradient needed)."""
        ...

    def __call__(
        self,
        model: nn.Module,
        inputs: tuple[Tensor, ...],
        targets: Tensor,
        weights: Tensor,
        objective: Objective,
    ) -> tuple[Tensor, Tensor]:
        """Per-replica weighted loss Σ_b weights · loss (R,) and the outputs, both detached;
        on return every parameter's ``grad`` holds the gradient of the summed loss."""
        ...


def compiled(loss: LossFunction, device: torch.device) -> LossFunction:
    """``torch.compile`` of a loss function (its backward too); CUDA graphs on CUDA."""
    # Dynamo caches compiled graphs per function: every batched model of a sweep and every
    # compaction (replicas leaving) is a new shape, more than the default limit of 8 (past
    # it, torch runs the step eagerly without saying so at the default log level).
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
    return torch.compile(loss, mode="reduce-overhead" if device.type == "cuda" else "default")


class AutogradStep:
    """The model's forward, the loss (:meth:`loss`, through torch.compile with
    ``cfg.compile``), then autograd's backward of the summed loss."""

    name = "autograd"

    def __init__(self, cfg: TrainConfig, device: torch.device) -> None:
        self._loss: LossFunction = compiled(self.loss, device) if cfg.compile else self.loss

    def outputs(self, model: nn.Module, inputs: tuple[Tensor, ...]) -> Tensor:
        return model(*inputs)

    def loss(
        self,
        model: nn.Module,
        inputs: tuple[Tensor, ...],
        targets: Tensor,
        weights: Tensor,
        objective: Objective,
    ) -> tuple[Tensor, Tensor]:
        """Per-replica weighted loss (R,) of the outputs, taken in float32 (or wider), and the
        outputs."""
        outputs = widened(self.outputs(model, inputs))
        return (example_losses(outputs, targets, objective) * weights).sum(1), outputs

    def __call__(
        self,
        model: nn.Module,
        inputs: tuple[Tensor, ...],
        targets: Tensor,
        weights: Tensor,
        objective: Objective,
    ) -> tuple[Tensor, Tensor]:
        per_replica, outputs = self._loss(model, inputs, targets, weights, objective)
        per_replica.sum().backward()
        return per_replica.detach(), outputs.detach()
