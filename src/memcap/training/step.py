"""One training step of the replicas still training: the batch, forward, loss, backward, Adam.

A :class:`Step` computes a replica-batched model's outputs (evaluations) and one step's
per-replica loss with every parameter's gradient. :class:`AutogradStep` is the one step of
both papers' experiments: the model's own ``forward``, the loss of :func:`example_losses` and
autograd's backward, optionally through ``torch.compile``. What trains is the model module as
written.

:func:`apply_update` is one whole step: the batch (drawn indices → inputs, targets, weights),
the bfloat16 copy's pull under bf16, the step's forward and backward, the gradients pushed
back, and one Adam update. :class:`EagerUpdate` launches those kernels one by one every step:
for paper A's small models on a GPU the launches and the Python around them take longer than
the arithmetic. :class:`GraphedUpdate` (``cfg.cuda_graph`` on CUDA) captures the same function
once as a CUDA graph, with the batch indices and the learning rate in fixed device buffers,
and replays it: one launch per step. The graph replays the kernels that function launched
during the capture, so the two compute the same numbers (the batch draws stay outside the
graph, made on the host's schedule). A capture that fails (a step that reads the device on
the host cannot be captured) falls back to eager steps with one log line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Literal, Protocol

import torch
from torch import Tensor, nn

from memcap.training.active import ActiveReplicas
from memcap.training.config import TrainConfig

Objective = Literal["classification", "regression", "distribution"]

_logger = logging.getLogger(__name__)


def widened(outputs: Tensor) -> Tensor:
    """Outputs for the loss: bfloat16 / float16 in float32, float32 and float64 as they are."""
    return outputs.float() if outputs.dtype in (torch.bfloat16, torch.float16) else outputs


def example_losses(outputs: Tensor, targets: Tensor, objective: Objective) -> Tensor:
    """Per-example loss of shape (R, B)."""
    if objective == "classification":
        return nn.functional.cross_entropy(
            outputs.flatten(0, 1), targets.flatten(), reduction="none"
        ).view(targets.shape)
    if objective == "regression":
        return (outputs - targets) ** 2
    return kl_divergence(targets, outputs)


def kl_divergence(target_probs: Tensor, logits: Tensor) -> Tensor:
    """KL(target ‖ softmax(logits)) over the last axis, with 0·log 0 = 0."""
    log_q = torch.log_softmax(logits, dim=-1)
    log_p = torch.where(target_probs > 0, target_probs.log(), torch.zeros_like(target_probs))
    return (target_probs * (log_p - log_q)).sum(-1)


def example_correct(
    outputs: Tensor, targets: Tensor, objective: Objective, regression_tol: float | None
) -> Tensor:
    """(R, B) True where the example is memorized (top logit right / error under tolerance)."""
    if objective == "classification":
        return outputs.argmax(-1) == targets
    if objective == "regression":
        if regression_tol is None:
            raise ValueError("the regression objective needs a regression_tol")
        return (outputs - targets).abs() < regression_tol
    return outputs.argmax(-1) == targets.argmax(-1)


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


WARMUP = 3  # eager steps before a capture: Adam's state, cuBLAS's workspace, caches


def apply_update(
    active: ActiveReplicas,
    step: Step,
    objective: Objective,
    batch_size: int | None,
    index: Tensor | None,
    lr: float | Tensor,
) -> tuple[Tensor, Tensor, Tensor]:
    """One step on the batch ``index`` (None: the full batch) at rate ``lr``; returns the
    batch's outputs, targets and example weights."""
    active.optimizer.zero_grad()
    inputs, targets, weights = active.take(index, batch_size)
    if active.compute is not None:  # bfloat16: the step runs on the rounded copy
        active.compute.pull()
        inputs = active.compute.inputs(inputs)
    _, outputs = step(active.step_model, inputs, targets, weights, objective)
    if active.compute is not None:
        active.compute.push_gradients()
    active.optimizer.step(lr)
    return outputs, targets, weights


class EagerUpdate:
    """:func:`apply_update`, kernel by kernel."""

    def __init__(
        self, active: ActiveReplicas, step: Step, objective: Objective, cfg: TrainConfig
    ) -> None:
        self.active, self.step, self.objective = active, step, objective
        self.batch_size = cfg.batch_size

    def __call__(self, lr: float) -> tuple[Tensor, Tensor, Tensor]:
        index = self.active.draw()
        return apply_update(self.active, self.step, self.objective, self.batch_size, index, lr)


class GraphedUpdate(EagerUpdate):
    """:func:`apply_update` captured once as a CUDA graph after :data:`WARMUP` eager steps,
    then replayed with the step's batch indices and learning rate copied into its buffers.
    Captured anew when the active replicas change (replicas leaving)."""

    def __init__(
        self, active: ActiveReplicas, step: Step, objective: Objective, cfg: TrainConfig
    ) -> None:
        super().__init__(active, step, objective, cfg)
        self._graph: torch.cuda.CUDAGraph | None = None
        self._version = -1  # the active set the graph and the eager count belong to
        self._eager = 0
        self._failed = False
        self._index: Tensor | None = None
        self._lr = torch.zeros((), device=active.index.device)
        self._out: tuple[Tensor, Tensor, Tensor] | None = None

    def __call__(self, lr: float) -> tuple[Tensor, Tensor, Tensor]:
        if self._failed:
            return super().__call__(lr)
        if self.active.version != self._version:
            self._version, self._graph, self._out, self._eager = self.active.version, None, None, 0
        if self._graph is None:
            if self._eager < WARMUP:
                self._eager += 1
                return self._on_side_stream(lr)
            self._capture()
            if self._failed:
                return super().__call__(lr)
        index = self.active.draw()
        if index is not None:
            self._index.copy_(index)
        self._lr.fill_(lr)
        self._graph.replay()
        return self._out

    def _on_side_stream(self, lr: float) -> tuple[Tensor, Tensor, Tensor]:
        """An eager step on a side stream, as CUDA graphs want their warm-up."""
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            out = EagerUpdate.__call__(self, lr)
        torch.cuda.current_stream().wait_stream(side)
        return out

    def _capture(self) -> None:
        active = self.active
        self._index = (
            None
            if active.stream is None
            else torch.zeros(
                (active.data.replicas, self.batch_size), dtype=torch.long, device=self._lr.device
            )
        )
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                self._out = apply_update(
                    active, self.step, self.objective, self.batch_size, self._index, self._lr
                )
        except RuntimeError as error:  # a host read of the device inside the step, say
            self._failed = True
            _logger.info("CUDA graph capture failed (%s): eager steps", str(error).splitlines()[0])
            return
        self._graph = graph
        _logger.info("training step captured as a CUDA graph (%d replicas)", active.data.replicas)


def updater(
    active: ActiveReplicas, step: Step, objective: Objective, cfg: TrainConfig
) -> EagerUpdate:
    """The update the loop runs: graphed where ``cfg.cuda_graph`` asks and the device is
    CUDA, else eager (a CUDA graph asked for elsewhere is logged and ignored)."""
    if cfg.cuda_graph:
        if active.index.device.type == "cuda":
            return GraphedUpdate(active, step, objective, cfg)
        _logger.info("cuda_graph has no effect on %s: eager steps", active.index.device.type)
    return EagerUpdate(active, step, objective, cfg)
