"""Mini-batches over few distinct examples, computed once per distinct example and weighted.

Where a replica's training set holds few distinct examples against the batch (paper B's
low_dim sweep: a sample of 2^14 sequences over N^S = 100 inputs, batches of 256), a batch
repeats most of its examples. Each distinct example's loss weighted by how often the batch
drew it, divided by the batch size, is the batch's mean loss: the same loss, gradient and
batch accuracy up to the order of summation, on fewer rows a step. The batch indices are
the stream's own (:class:`memcap.training.batches.BatchStream`): the examples drawn do not
change, only how they are summed.
"""

from __future__ import annotations

import torch
from torch import Tensor

from memcap.training.data import ReplicaData


class CountedBatches:
    """Every replica's distinct (inputs, targets) rows and the row of each of its examples.

    Args:
        data: the replicas' training sets; every input and the targets integer-valued.
        batch: examples per replica and step (the mean's divisor).
    """

    def __init__(self, data: ReplicaData, batch: int) -> None:
        rows = _rows(data)  # (R, T, K): one row per example
        sizes = data.sizes.tolist()
        pairs = [_first_seen(r[:n]) for r, n in zip(rows, sizes, strict=True)]
        distinct, inverse = [d for d, _ in pairs], [i for _, i in pairs]
        width = max(d.shape[0] for d in distinct)
        # replicas with fewer distinct rows repeat their first one: no example counts there
        padded = torch.stack(
            [torch.cat([d, d[:1].expand(width - d.shape[0], -1)]) for d in distinct]
        )
        self.inputs, self.targets = _split(padded, data)
        t_max = rows.shape[1]
        self.row_of = torch.stack(
            [torch.cat([i, i.new_zeros(t_max - i.shape[0])]) for i in inverse]
        )  # (R, T_max): the distinct row of every example (padding examples: row 0)
        self.batch = batch
        self._ones: Tensor | None = None

    @property
    def distinct(self) -> int:
        """Distinct rows a step computes per replica (the largest replica's count)."""
        return int(self.targets.shape[1])

    def take(self, index: Tensor) -> tuple[tuple[Tensor, ...], Tensor, Tensor]:
        """Inputs (R, U, ...), targets (R, U) and weights (R, U) of the batch ``index`` (R, B):
        each distinct row's count in the batch over the batch size."""
        if self._ones is None or self._ones.shape != index.shape:
            self._ones = torch.full(index.shape, 1.0 / self.batch, device=index.device)
        rows = torch.gather(self.row_of, 1, index)
        weights = self._ones.new_zeros(self.targets.shape).scatter_add_(1, rows, self._ones)
        return self.inputs, self.targets, weights

    def select(self, replicas: Tensor) -> None:
        """Keep the replicas ``replicas`` (positions along the replica axis)."""
        self.inputs = tuple(x.index_select(0, replicas) for x in self.inputs)
        self.targets = self.targets.index_select(0, replicas)
        self.row_of = self.row_of.index_select(0, replicas)
        self._ones = None


def counted_batches(data: ReplicaData, batch: int | None) -> CountedBatches | None:
    """Counted batches where they pay: integer data whose replicas hold at most half a batch
    of distinct rows each; else None (the batches as drawn)."""
    integer = all(
        not (x.is_floating_point() or x.is_complex()) for x in (*data.inputs, data.targets)
    )
    if batch is None or not integer:
        return None
    counted = CountedBatches(data, batch)
    return counted if 2 * counted.distinct <= batch else None


def _first_seen(rows: Tensor) -> tuple[Tensor, Tensor]:
    """Distinct rows (U, K) of ``rows`` (T, K) in order of first appearance, and the distinct
    row of each. (Not sorted: a model may read sorted inputs as its whole input table.)"""
    keys = _row_keys(rows)
    if keys is None:
        inverse = torch.unique(rows, dim=0, return_inverse=True)[1]
    else:  # a 1-D unique: far faster than unique over rows
        inverse = torch.unique(keys, return_inverse=True)[1]
    positions = torch.arange(rows.shape[0], device=rows.device)
    first = positions.new_full((int(inverse.max()) + 1,), rows.shape[0])
    first = first.scatter_reduce_(0, inverse, positions, "amin")
    order = torch.argsort(first)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(order.shape[0], device=order.device)
    return rows[first[order]], rank[inverse]


def _row_keys(rows: Tensor) -> Tensor | None:
    """One integer per row (T, K), equal for equal rows only: the row read as a mixed-radix
    number whose digits range over each column's values; None where a value is negative or
    the keys would not fit in int64."""
    if rows.numel() == 0 or int(rows.min()) < 0:
        return None
    weights, total = [], 1
    for base in reversed((rows.amax(0) + 1).tolist()):
        weights.append(total)
        total *= base
    if total > torch.iinfo(torch.int64).max:
        return None
    return (rows * torch.tensor(weights[::-1], device=rows.device)).sum(1)


def _rows(data: ReplicaData) -> Tensor:
    """(R, T, K) every example's inputs and target flattened into one integer row."""
    R, T = data.targets.shape[:2]
    parts = [x.reshape(R, T, -1).long() for x in (*data.replica_inputs(), data.targets)]
    return torch.cat(parts, 2)


def _split(rows: Tensor, data: ReplicaData) -> tuple[tuple[Tensor, ...], Tensor]:
    """Inputs and targets of distinct rows (R, U, K), in the data's shapes and dtypes."""
    R, U = rows.shape[:2]
    out, start = [], 0
    for x in (*data.replica_inputs(), data.targets):
        shape = x.shape[2:]
        width = shape.numel()
        out.append(rows[:, :, start : start + width].reshape(R, U, *shape).to(x.dtype).contiguous())
        start += width
    return tuple(out[:-1]), out[-1]
