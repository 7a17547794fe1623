"""The replicas still training in a batched model: its parameters, Adam, the bfloat16 copy.

A replica that has memorized all its examples leaves the batch (``leave_when_fit``), and so
does one no longer learning when a budget ends (``extra_budgets``): one
:meth:`ActiveReplicas.select` compacts the replicas' whole state to those that stay (model
rows, data, Adam state, the bfloat16 copy, batch streams, example weights; ``index_select``
along the replica axis), so later steps spend nothing on them. Every replica's own
computation does not depend on the others (the loop's invariant), so those that stay train
as they would have. A model with replica-axis buffers compacts them itself in its
``select_buffers(index)`` (:func:`select_model`).

:class:`FusedAdam` is Adam through PyTorch's fused kernel, without ``torch.optim``: the same
update as ``torch.optim.Adam(params, lr, fused=True)`` (betas 0.9 and 0.999, eps 1e-8, no
weight decay; the state of a parameter starts at its first gradient), the same kernel with the
same arguments, so the same numbers. Why not ``torch.optim``: its first optimizer imports
``torch._dynamo`` (seconds of CPU time in every training job) and its ``step`` wraps the one
kernel call in Python bookkeeping that is the main cost of a small model's step.

The arithmetic of a step (``precision``):

- ``float32``: the model as it is.
- ``tf32``: float32 tensors, matmuls in TF32 on CUDA (``torch.set_float32_matmul_precision
  ("high")``) while training runs; the previous setting is restored after. No effect
  elsewhere (logged): the CPU keeps float32, so its results do not change.
- ``bf16``: forward and backward run on a bfloat16 copy of the model (:class:`ComputeCopy`);
  its gradients go back to the float32 master weights, which float32 Adam updates. This is
  what ``torch.autocast`` with float32 master weights does for matmuls, done by copy instead:
  every operation of the model's forward and backward runs in bfloat16. The loss is taken in
  float32 from the model's outputs. Evaluations always run on the float32 master weights.

Whatever the precision, training flushes subnormal floats to zero on the CPU
(:func:`subnormals_flushed`): as gradients and attention weights fade late in training,
subnormal values make the CPU's arithmetic tens of times slower, and they move no weight:
Adam's update of a parameter from such a gradient is below that parameter's own rounding.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Iterable, Iterator, Sequence

import torch
from torch import Tensor, nn

from memcap.training.config import Precision, TrainConfig
from memcap.training.data import BatchStream, ReplicaData, counted_batches, replica_generators

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


@contextlib.contextmanager
def matmul_precision(precision: Precision, device: torch.device) -> Iterator[None]:
    """TF32 matmuls on CUDA while the block runs when ``precision`` is "tf32"."""
    if precision != "tf32":
        yield
        return
    if device.type != "cuda":
        _logger.info("precision tf32 has no effect on %s: training stays float32", device.type)
        yield
        return
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


@contextlib.contextmanager
def subnormals_flushed() -> Iterator[None]:
    """Subnormal floats read and written as zero on the CPU (x86 FTZ/DAZ) while the block
    runs; the default (kept) after."""
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)


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
