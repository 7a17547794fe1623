"""The one door between a model and the arithmetic of its training step.

A :class:`Step` computes a replica-batched model's outputs (evaluations) and one training
step's per-replica loss with every parameter's gradient. :class:`ReferenceStep` is the
model as written: its ``forward`` and autograd's backward, for any ``nn.Module``. An
experiment may offer a fast step (:mod:`memcap.synthetic.engine`, :mod:`memcap.aot.engine`)
for the exact model class it was derived for; :func:`choose_step` takes it where it
supports the run and the config asks for ``engine: fast``, and falls back to the reference
with one log line otherwise. Tests hold every fast step equal to the reference (outputs,
losses, gradients) up to float rounding.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

import torch
from torch import Tensor, nn

from memcap.training.config import TrainConfig
from memcap.training.objectives import Objective, example_losses

_logger = logging.getLogger(__name__)

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


class FastEngine(Protocol):
    """An experiment's fast step: a class that says which runs it supports."""

    @staticmethod
    def unsupported(model: nn.Module, objective: Objective, cfg: TrainConfig) -> str | None:
        """Why the fast step cannot train this run (None: it can)."""
        ...

    def __call__(self, cfg: TrainConfig, device: torch.device) -> Step: ...


def compiled(loss: LossFunction, device: torch.device) -> LossFunction:
    """``torch.compile`` of a loss function (its backward too); CUDA graphs on CUDA."""
    # Dynamo caches compiled graphs per function: every batched model of a sweep and every
    # compaction (replicas leaving) is a new shape, more than the default limit of 8 (past
    # it, torch runs the step eagerly without saying so at the default log level).
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
    return torch.compile(loss, mode="reduce-overhead" if device.type == "cuda" else "default")


class AutogradStep:
    """A step whose loss autograd differentiates: :meth:`loss` (through torch.compile with
    ``cfg.compile``), then the backward of the summed loss. Subclasses change how the loss
    and the outputs are computed."""

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
        """Per-replica weighted loss (R,) of the outputs, taken in float32, and the outputs."""
        outputs = self.outputs(model, inputs).float()  # a float32 output is returned as it is
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


class ReferenceStep(AutogradStep):
    """The model's own forward and autograd's backward."""

    name = "reference"


def choose_step(
    cfg: TrainConfig,
    model: nn.Module,
    objective: Objective,
    device: torch.device,
    fast: FastEngine | None = None,
) -> Step:
    """The step a run trains through: ``fast`` where ``cfg.engine`` is "fast" and it
    supports the run, else the reference (a fallback is logged with its reason)."""
    if cfg.engine == "fast" and fast is not None:
        reason = fast.unsupported(model, objective, cfg)
        if reason is None:
            return fast(cfg, device)
        _logger.info("engine fast does not support this run (%s): reference step", reason)
    return ReferenceStep(cfg, device)
