"""The replicas still training in a batched model, and how replicas leave it.

A replica that has memorized all its examples leaves the batch (``leave_when_fit``), and so
does one no longer learning when a budget ends (``extra_budgets``): one
:meth:`ActiveReplicas.select` compacts the replicas' whole state to those that stay (model
rows, data, Adam state, the bfloat16 copy, batch streams, example weights; ``index_select``
along the replica axis), so later steps spend nothing on them. Every replica's own
computation does not depend on the others (the loop's invariant), so those that stay train
as they would have. A model with replica-axis buffers compacts them itself in its
``select_buffers(index)`` (:func:`select_model`).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from memcap.training.adam import FusedAdam
from memcap.training.batches import BatchStream, replica_generators
from memcap.training.config import TrainConfig
from memcap.training.counted import counted_batches
from memcap.training.data import ReplicaData
from memcap.training.precision import ComputeCopy


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
