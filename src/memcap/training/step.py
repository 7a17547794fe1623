"""One training step of the replicas still training: their state, the batch, forward,
loss, backward and Adam.

:class:`ActiveReplicas` holds what the replicas still training share: the model, the data,
:class:`FusedAdam`, the bfloat16 copy, the batch streams and the example weights. A replica
that has memorized all its examples leaves (``leave_when_fit``), and so does one no longer
learning when a budget ends (``extra_budgets``): one :meth:`ActiveReplicas.select` compacts
that whole state to the replicas that stay (``index_select`` along the replica axis; a model
with replica-axis buffers compacts them in its ``select_buffers(index)``). Every replica's
computation does not depend on the others (the loop's invariant), so those that stay train as
they would have.

:func:`apply_update` is one step: the batch (drawn indices → inputs, targets, weights), the
bfloat16 copy's pull under bf16, the model's forward and autograd's backward
(:class:`AutogradStep`, optionally through ``torch.compile``), the gradients pushed back and
one Adam update. :class:`EagerUpdate` runs it kernel by kernel (the CUDA graph that replays it
is :mod:`~memcap.training.graph`'s).

:class:`FusedAdam` is the update of ``torch.optim.Adam(params, lr, fused=True)`` (betas 0.9 and
0.999, eps 1e-8, no weight decay; a parameter's state starts at its first gradient), the same
kernel with the same arguments, so the same numbers, without ``torch.optim``: its first
optimizer imports ``torch._dynamo`` (seconds of CPU in every job) and its ``step`` wraps the
kernel in Python bookkeeping that is the main cost of a small model's step.

Under ``precision: bf16`` the forward and backward run on a bfloat16 copy of the model
(:class:`ComputeCopy`) whose gradients go back to the float32 master weights that float32 Adam
updates: what ``torch.autocast`` with float32 masters does for matmuls, done by copy, so every
operation runs in bfloat16. The loss is taken in float32 (:func:`widened`); evaluations run on
the float32 masters.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

import torch
from torch import Tensor, nn

from memcap.training.config import TrainConfig
from memcap.training.data import (
    BatchStream,
    Objective,
    ReplicaData,
    counted_batches,
    example_losses,
    replica_generators,
    widened,
)

_logger = logging.getLogger(__name__)


class ActiveReplicas:
    """The model, optimizer, data and batch streams of the replicas still training.

    Args:
        model: the replica-batched model (the caller's object until a replica leaves).
        data: every replica's training set.
        cfg: optimisation settings (batching, precision).
        seeds: one mini-batch seed per replica.
    """

    def __init__(
        self,
        model: nn.Module,
        data: ReplicaData,
        cfg: TrainConfig,
        seeds: Sequence[int],
    ) -> None:
        leaving = cfg.leave_when_fit or cfg.extra_budgets > 0
        if leaving and not hasattr(model, "select_buffers") and any(True for _ in model.buffers()):
            raise ValueError(
                "leave_when_fit and extra_budgets need a model with buffers to define "
                "select_buffers(index) (their replica axis must shrink with the parameters')"
            )
        self.model, self.data = model, data
        self.index = torch.arange(data.replicas, device=data.sizes.device)  # original positions
        self.optimizer = FusedAdam(model.parameters())
        self.compute = ComputeCopy(model) if cfg.precision == "bf16" else None
        device = data.sizes.device
        self.stream = (
            None
            if cfg.batch_size is None
            else BatchStream(
                data.sizes.tolist(),
                cfg.batch_size,
                cfg.sampling,
                replica_generators(seeds, device),
            )
        )
        # few distinct examples against the batch: each computed once, weighted by its count
        self.counted = None if self.stream is None else counted_batches(data, cfg.batch_size)
        self._copied = False
        self._weights: Tensor | None = None
        self.version = 0  # counts the changes of the active set (a captured step is redone)

    def example_weights(self, batch_size: int | None) -> Tensor:
        """(R, B) weight of each example in its replica's mean loss: 1 / batch size, or
        1 / T on valid examples of a full batch (computed once per set of replicas)."""
        if self._weights is None:
            data = self.data
            if batch_size is None:
                self._weights = data.mask().float() / data.sizes[:, None]
            else:
                shape = (data.replicas, batch_size)
                self._weights = torch.full(shape, 1.0 / batch_size, device=data.sizes.device)
        return self._weights

    def draw(self) -> Tensor | None:
        """The next training step's (R, B) example indices (None: the full batch)."""
        return None if self.stream is None else self.stream.next()

    def peek(self) -> Tensor | None:
        """The indices :meth:`draw` gives next, without moving the batch streams."""
        return None if self.stream is None else self.stream.peek()

    def take(
        self, index: Tensor | None, batch_size: int | None
    ) -> tuple[tuple[Tensor, ...], Tensor, Tensor]:
        """Inputs, targets and example weights (R, B) of the batch ``index`` (:meth:`draw`)."""
        if index is None:
            return self.data.replica_inputs(), self.data.targets, self.example_weights(batch_size)
        if self.counted is not None:
            return self.counted.take(index)
        return *self.data.take(index), self.example_weights(batch_size)

    @property
    def step_model(self) -> nn.Module:
        """The module that runs the training step (the bfloat16 copy under bf16)."""
        return self.model if self.compute is None else self.compute.model

    def select(self, local: Tensor) -> None:
        """Keep the replicas at positions ``local`` (among the active ones); the rest leave.

        The first time, the model is copied: the caller's model keeps every replica's axis,
        for the best states restored into it after training.
        """
        if not self._copied:
            self.model = copy.deepcopy(self.model)
            self._copied = True
        select_model(self.model, local)
        self.optimizer = self.optimizer.selected(list(self.model.parameters()), local)
        if self.compute is not None:
            self.compute = ComputeCopy(self.model)
        self.data = self.data.select(local)
        if self.stream is not None:
            self.stream.keep(local.tolist())
        if self.counted is not None:
            self.counted.select(local)
        self.index = self.index[local]
        self._weights = None
        self.version += 1


def select_model(model: nn.Module, index: Tensor) -> None:
    """Keep replicas ``index`` of a replica-batched model, in place: every parameter is replaced
    by a new one holding those rows (a new leaf: autograd keeps the shape a parameter had when
    it first took a gradient), and the model's ``select_buffers`` compacts its buffers where it
    defines one."""
    for name, p in list(model.named_parameters()):
        owner, _, attribute = name.rpartition(".")
        module = model.get_submodule(owner)
        setattr(module, attribute, nn.Parameter(p.detach().index_select(0, index)))
    if hasattr(model, "select_buffers"):
        model.select_buffers(index)


class FusedAdam:
    """Adam on ``params``; :meth:`step` takes the learning rate of that step.

    Args:
        params: the parameters to update (floating point, all on one device).
    """

    betas = (0.9, 0.999)
    eps = 1e-8

    def __init__(self, params: Iterable[nn.Parameter]) -> None:
        self.params = list(params)
        self.exp_avg: list[torch.Tensor | None] = [None] * len(self.params)
        self.exp_avg_sq: list[torch.Tensor | None] = [None] * len(self.params)
        self.steps: list[torch.Tensor | None] = [None] * len(self.params)

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self, lr: float | torch.Tensor) -> None:
        """One update of every parameter that has a gradient, at rate ``lr`` (a 0-d tensor on
        the parameters' device: read when the kernel runs, as a captured CUDA graph needs)."""
        live = [i for i, p in enumerate(self.params) if p.grad is not None]
        for i in live:
            if self.steps[i] is None:
                p = self.params[i]
                self.steps[i] = torch.zeros((), dtype=torch.float32, device=p.device)
                self.exp_avg[i] = torch.zeros_like(p, memory_format=torch.preserve_format)
                self.exp_avg_sq[i] = torch.zeros_like(p, memory_format=torch.preserve_format)
        if not live:
            return
        steps = [self.steps[i] for i in live]
        torch._foreach_add_(steps, 1)
        torch._fused_adam_(
            [self.params[i] for i in live],
            [self.params[i].grad for i in live],
            [self.exp_avg[i] for i in live],
            [self.exp_avg_sq[i] for i in live],
            [],
            steps,
            amsgrad=False,
            lr=lr,
            beta1=self.betas[0],
            beta2=self.betas[1],
            weight_decay=0.0,
            eps=self.eps,
            maximize=False,
            grad_scale=None,
            found_inf=None,
        )

    def selected(self, params: list[nn.Parameter], index: torch.Tensor) -> FusedAdam:
        """An optimizer on ``params`` (this one's parameters with only the replicas ``index``
        kept along axis 0) carrying those replicas' moments and step counts."""
        kept = FusedAdam(params)
        for i, steps in enumerate(self.steps):
            if steps is not None:
                kept.steps[i] = steps.clone()
                kept.exp_avg[i] = self.exp_avg[i].index_select(0, index)
                kept.exp_avg_sq[i] = self.exp_avg_sq[i].index_select(0, index)
        return kept


class ComputeCopy:
    """A bfloat16 copy of a float32 model that runs the training step's forward and backward.

    Args:
        model: the float32 master model; its parameters keep every update.
    """

    dtype = torch.bfloat16

    def __init__(self, model: nn.Module) -> None:
        self.model = copy.deepcopy(model).to(self.dtype)
        self._masters = list(model.parameters())
        self._copies = list(self.model.parameters())
        self._last: tuple[tuple[Tensor, ...], tuple[Tensor, ...]] | None = None

    @torch.no_grad()
    def pull(self) -> None:
        """Round the master weights into the copy (before a forward)."""
        torch._foreach_copy_(self._copies, self._masters)

    def push_gradients(self) -> None:
        """Hand the copy's gradients to the masters as float32 (after a backward)."""
        for master, own in zip(self._masters, self._copies, strict=True):
            master.grad = None if own.grad is None else own.grad.float()
            own.grad = None

    def inputs(self, inputs: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        """Floating-point inputs in bfloat16; indices stay as they are. The same input
        tensors (full batches) get the same cast tensors back, so caches keyed on them hold."""
        if self._last is not None and all(
            a is b for a, b in zip(self._last[0], inputs, strict=True)
        ):
            return self._last[1]
        cast = tuple(x.to(self.dtype) if x.is_floating_point() else x for x in inputs)
        self._last = (inputs, cast)
        return cast


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
