"""What the replicas train on and are scored by: their training sets, the mini-batches drawn
from them and the per-example losses.

:class:`ReplicaData` holds R replicas' training sets padded to a common size.
:class:`BatchStream` draws every replica's mini-batch indices from its own generator.
:class:`CountedBatches` serves batches over few distinct examples (paper B's low_dim sweep:
a sample of 2^14 sequences over N^S = 100 inputs, batches of 256) as each distinct example
once, weighted by how often the batch drew it over the batch size: the batch's mean loss,
gradient and accuracy up to the order of summation, on fewer rows a step. The examples drawn
do not change, only how they are summed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn

from memcap.training.config import Sampling

Objective = Literal["classification", "regression", "distribution"]


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


BLOCK = 64  # steps of draws with replacement made at once per replica


def replica_generators(seeds: Sequence[int], device: torch.device) -> list[torch.Generator]:
    """One generator per replica, so a replica's random stream does not depend on R."""
    return [torch.Generator(device=device).manual_seed(int(s)) for s in seeds]


class BatchStream:
    """Endless (R, batch) example indices: drawn with replacement, or shuffled epochs.

    Shuffled epochs (the authors' ``DataLoader(shuffle=True)``) cut one permutation of each
    replica's examples into size // batch batches (a remainder is dropped); replicas must
    share one size. Each replica draws from its own generator, so :meth:`keep` (replicas
    leaving) leaves the others' streams as they were.

    Args:
        sizes: each replica's number of examples.
        batch: examples per replica and step.
        sampling: "replacement" or "shuffle".
        generators: one per replica.
    """

    def __init__(
        self,
        sizes: Sequence[int],
        batch: int,
        sampling: Sampling,
        generators: list[torch.Generator],
    ) -> None:
        if sampling == "shuffle" and len(set(sizes)) > 1:
            raise ValueError("shuffled epochs need replicas of one dataset size")
        self.sizes = [int(s) for s in sizes]  # host ints: no device sync per step
        self.batch, self.sampling, self.generators = batch, sampling, list(generators)
        self._order: Tensor | None = None  # this epoch's permutations (shuffle)
        self._start = 0
        self._drawn: Tensor | None = None  # (R, BLOCK, batch): the next steps' draws
        self._step = 0

    def next(self) -> Tensor:
        """The next step's (R, batch) indices into each replica's own examples."""
        if self.sampling == "replacement":
            return self._with_replacement()
        size = self.sizes[0]
        if self._order is None or self._start + self.batch > size:
            self._order = torch.stack(
                [torch.randperm(size, generator=g, device=g.device) for g in self.generators]
            )
            self._start = 0
        batch = self._order[:, self._start : self._start + self.batch]
        self._start += self.batch
        return batch

    def peek(self) -> Tensor:
        """The indices :meth:`next` returns next, without moving the stream (the generators
        draw what the next step would draw, once)."""
        batch = self.next()
        if self.sampling == "replacement":
            self._step -= 1
        else:
            self._start -= self.batch
        return batch

    def _with_replacement(self) -> Tensor:
        """Draws with replacement, BLOCK steps at a time: one launch per replica per block
        instead of per step (a step of a small model is bound by such launches). A CPU
        generator draws the same numbers either way; a CUDA generator's Philox offsets
        advance per call, so there the block is a different, equally uniform stream."""
        if self._drawn is None or self._step == self._drawn.shape[1]:
            self._drawn = torch.stack(
                [
                    torch.randint(size, (BLOCK, self.batch), generator=g, device=g.device)
                    for size, g in zip(self.sizes, self.generators, strict=True)
                ]
            )
            self._step = 0
        self._step += 1
        return self._drawn[:, self._step - 1]

    def keep(self, index: Sequence[int]) -> None:
        """Keep the streams of replicas ``index`` (positions among the current ones)."""
        self.sizes = [self.sizes[i] for i in index]
        self.generators = [self.generators[i] for i in index]
        if self._order is not None:
            self._order = self._order[list(index)]
        if self._drawn is not None:
            self._drawn = self._drawn[list(index)]


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
