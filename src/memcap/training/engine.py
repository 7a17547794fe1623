"""The one door between a model and the arithmetic of its training step.

A :class:`Step` computes a replica-batched model's outputs (evaluations) and one training
step's per-replica loss with every parameter's gradient. :class:`ReferenceStep` is the
model as written: its ``forward`` and autograd's backward, for any ``nn.Module``. An
experiment may offer a fast step (:mod:`memcap.synthetic.engine`, :mod:`memcap.aot.engine`)
for the model class it was derived for. :func:`choose_step` takes it where the config asks
for ``engine: fast`` and the model is of that class (subclasses included), as a
:class:`CheckedStep`: before the first training step the loop compares it with the
reference on the run's first batch (:mod:`memcap.training.verify`: outputs, loss, every
gradient) and keeps it only if it computes what the model's own forward and autograd
compute; otherwise the run trains through the reference, with one log line naming the
difference. Tests also hold every fast step equal to the reference (outputs, losses,
gradients, whole runs) up to float rounding.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

import torch
from torch import Tensor, nn

from memcap.training.config import TrainConfig
from memcap.training.objectives import Objective, example_losses, widened

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
    """An experiment's fast step: a class that says which models and runs it reads."""

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


class ReferenceStep(AutogradStep):
    """The model's own forward and autograd's backward."""

    name = "reference"


class CheckedStep:
    """A fast step on probation: the loop checks it against the reference before its first
    step (:func:`memcap.training.verify.verified`) and sets :attr:`chosen` to the step it
    keeps; until then the reference computes."""

    def __init__(self, fast: Step, reference: ReferenceStep) -> None:
        self.fast, self.reference = fast, reference
        self.chosen: Step | None = None

    @property
    def name(self) -> str:
        return f"{self.fast.name} (to be checked)" if self.chosen is None else self.chosen.name

    def outputs(self, model: nn.Module, inputs: tuple[Tensor, ...]) -> Tensor:
        return (self.chosen or self.reference).outputs(model, inputs)

    def __call__(
        self,
        model: nn.Module,
        inputs: tuple[Tensor, ...],
        targets: Tensor,
        weights: Tensor,
        objective: Objective,
    ) -> tuple[Tensor, Tensor]:
        return (self.chosen or self.reference)(model, inputs, targets, weights, objective)


def choose_step(
    cfg: TrainConfig,
    model: nn.Module,
    objective: Objective,
    device: torch.device,
    fast: FastEngine | None = None,
) -> Step:
    """The step a run trains through: ``fast``, to be checked against the reference on the
    first batch (:class:`CheckedStep`), where ``cfg.engine`` is "fast" and it reads the model;
    else the reference (a fallback is logged with its reason)."""
    if cfg.engine == "fast" and fast is not None:
        reason = fast.unsupported(model, objective, cfg)
        if reason is None:
            return CheckedStep(fast(cfg, device), ReferenceStep(cfg, device))
        _logger.info("engine fast does not support this run (%s): reference step", reason)
    return ReferenceStep(cfg, device)
