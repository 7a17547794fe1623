"""Training sets of R replicas, padded to a common size, as the training loop reads them."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class ReplicaData:
    """Training sets of R replicas, padded to a common size.

    Attributes:
        inputs: tensors of shape (R, T_max, ...) passed to the model, indexed per example;
            with ``source``, (D, T_max, ...): one row per distinct training set. An input of
            shape (R, 1, ...) is the same for every example (paper A's shared context): a
            batch reads it as it is, and the model broadcasts it over the batch.
        targets: (R, T_max) class indices or regression values, or (R, T_max, C)
            target distributions.
        sizes: (R,) number of valid examples of each replica (the first ``sizes[r]`` rows).
        source: (R,) the row of ``inputs`` that replica r reads, or None (row r). Replicas
            that train on one dataset (paired sweeps, nested T) then share its storage: at
            paper A's sizes a copy per replica would not fit a GPU. The model always gets
            every replica's own rows, gathered through ``source`` (a batch, or a chunk of
            examples, at a time).
    """

    inputs: tuple[Tensor, ...]
    targets: Tensor
    sizes: Tensor
    source: Tensor | None = None

    @property
    def replicas(self) -> int:
        return int(self.sizes.shape[0])

    def mask(self) -> Tensor:
        """(R, T_max) True where the example is valid."""
        t_max = self.targets.shape[1]
        return torch.arange(t_max, device=self.sizes.device)[None, :] < self.sizes[:, None]

    def replica_inputs(self) -> tuple[Tensor, ...]:
        """Every replica's inputs (R, T_max, ...): ``inputs`` itself, or gathered by
        ``source`` (a copy)."""
        return self._per_replica(self.inputs)

    def examples(self, rows: slice) -> tuple[Tensor, ...]:
        """Every replica's inputs of the examples ``rows`` (gathered through ``source``)."""
        one = self.targets.shape[1] > 1  # a row of size 1 then serves every example
        return self._per_replica(
            tuple(x if one and x.shape[1] == 1 else x[:, rows] for x in self.inputs)
        )

    def _per_replica(self, inputs: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        """Stored rows ``inputs`` as every replica's own: themselves, or gathered by
        ``source``."""
        if self.source is None:
            return inputs
        return tuple(x.index_select(0, self.source) for x in inputs)

    def take(self, index: Tensor) -> tuple[tuple[Tensor, ...], Tensor]:
        """Inputs and targets at per-replica example indices ``index`` of shape (R, B)."""
        return tuple(self._rows(x, index) for x in self.inputs), gather_rows(self.targets, index)

    def _rows(self, x: Tensor, index: Tensor) -> Tensor:
        if x.shape[1] == 1 < self.targets.shape[1]:  # one row read by every example
            return x if self.source is None else x.index_select(0, self.source)
        if self.source is None:
            return gather_rows(x, index)
        return x[self.source[:, None], index]

    def select(self, replicas: Tensor) -> ReplicaData:
        """The training sets of replicas ``replicas`` (positions along the replica axis);
        shared rows that none of them reads are dropped (None: each reads its own)."""
        if self.source is None:
            inputs, source = tuple(x.index_select(0, replicas) for x in self.inputs), None
        else:
            rows, source = self.source.index_select(0, replicas).unique(return_inverse=True)
            inputs = tuple(x.index_select(0, rows) for x in self.inputs)
            if len(rows) == len(replicas):  # nothing shared: row r for replica r
                inputs, source = tuple(x.index_select(0, source) for x in inputs), None
        return ReplicaData(
            inputs,
            self.targets.index_select(0, replicas),
            self.sizes.index_select(0, replicas),
            source,
        )


def gather_rows(x: Tensor, index: Tensor) -> Tensor:
    """Rows ``index`` (R, B) of ``x`` (R, T, ...) → (R, B, ...)."""
    expanded = index.view(*index.shape, *([1] * (x.dim() - 2))).expand(*index.shape, *x.shape[2:])
    return torch.gather(x, 1, expanded)
