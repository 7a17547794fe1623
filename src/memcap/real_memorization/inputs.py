"""The examples a layer trains on: its frozen queries and contexts, or i.i.d. controls of the
same shape, each seed's subset and labels the same for every input.

A seed picks which of the layer's T examples it trains on (a seeded order; the ladder trains on
its first T), and takes the first n' consecutive tokens of each context: any n' rows of a
rank-n context have rank n', so Assumption 2 carries over to n'. A *shared* context is the
first example's, read by every query. The controls replace the arrays and nothing else:
*uniform* draws every entry i.i.d. on [0, 1] (as the synthetic stage does), *gaussian* every
token i.i.d. from the normal with the real tokens' mean and covariance. Labels (uniform over C
classes, or uniform on [0, 1]) depend on the seed and task only, so every input of a seed
trains on the same labels, from the same initialisation and batches: the comparisons pair.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from memcap.extract.store import ExtractOutputs
from memcap.synthetic.sweep import Draw
from memcap.synthetic.tasks import SyntheticSet
from memcap.training.config import derive_seed

JITTER = 1e-6  # of the mean variance, added to the covariance's diagonal before Cholesky


@dataclass(frozen=True)
class Examples:
    """One layer's examples: queries (T, d) and the first n' tokens of their contexts (T, n', d),
    float32."""

    queries: Tensor
    contexts: Tensor

    @property
    def shape(self) -> tuple[int, int, int]:
        """(T, n', d)."""
        return tuple(self.contexts.shape)  # type: ignore[return-value]

    @classmethod
    def load(cls, folder: str | Path, layer: str, n: int) -> Examples:
        """The layer's extracted examples from a model's extraction folder, contexts cut to
        their first ``n`` tokens (memory-mapped: only those are read)."""
        files = ExtractOutputs.in_folder(folder, layer)
        contexts = np.load(files.contexts, mmap_mode="r")
        if contexts.shape[1] < n:
            raise ValueError(
                f"real_memorization.n = {n} exceeds the {contexts.shape[1]} context tokens of "
                f"{files.contexts}; use n <= {contexts.shape[1]}"
            )
        queries = torch.from_numpy(np.array(np.load(files.queries), dtype=np.float32))
        return cls(queries, torch.from_numpy(np.array(contexts[:, :n], dtype=np.float32)))


def control(examples: Examples, kind: str, seed: int) -> Examples:
    """I.i.d. examples of ``examples``' shape: ``uniform`` on [0, 1], or ``gaussian`` with the
    real tokens' mean and covariance (queries and context tokens pooled), from ``seed``."""
    T, n, d = examples.shape
    g = torch.Generator().manual_seed(int(seed))
    if kind == "uniform":
        return Examples(torch.rand(T, d, generator=g), torch.rand(T, n, d, generator=g))
    if kind != "gaussian":
        raise ValueError(f"unknown control '{kind}'")
    tokens = torch.cat([examples.queries, examples.contexts.reshape(-1, d)]).double()
    mean = tokens.mean(0)
    cov = torch.cov(tokens.T)
    cov += JITTER * cov.diagonal().mean() * torch.eye(d, dtype=cov.dtype)
    root = torch.linalg.cholesky(cov)

    def normal(*shape: int) -> Tensor:
        z = torch.randn(*shape, d, generator=g, dtype=torch.float64)
        return (mean + z @ root.T).float()

    return Examples(normal(T), normal(T, n))


def layer_draw(examples: Examples, kind: str, base_seed: int, classes: int) -> Draw:
    """The stage's data for input ``kind`` (real, uniform or gaussian) of one layer: a
    :data:`~memcap.synthetic.sweep.Draw` for :func:`memcap.synthetic.sweep.run_sweep`."""

    @cache
    def arrays(seed: int) -> Examples:
        """The seed's examples: the layer's, or its control drawn once for every key."""
        if kind == "real":
            return examples
        return control(examples, kind, derive_seed(base_seed, "real control", kind, seed))

    def draw(key: tuple, size: int) -> SyntheticSet:
        seed, n, context, task = key
        return select(arrays(seed), size, n, context, task, classes, base_seed, seed)

    return draw


def select(
    examples: Examples,
    size: int,
    n: int,
    context: str,
    task: str,
    classes: int,
    base_seed: int,
    seed: int,
) -> SyntheticSet:
    """A seed's first ``size`` examples in its order, contexts cut to ``n`` tokens (or the
    first example's for every query), and its labels."""
    T = examples.shape[0]
    if size > T:
        raise ValueError(f"{size} examples asked of a layer with {T}")
    g = torch.Generator().manual_seed(derive_seed(base_seed, "real order", seed))
    order = torch.randperm(T, generator=g)[:size]
    queries = examples.queries[order]
    if context == "shared":
        contexts = examples.contexts[order[:1], :n].expand(size, n, -1)
    else:
        contexts = examples.contexts[order, :n]
    g = torch.Generator().manual_seed(derive_seed(base_seed, "real labels", seed, task))
    if task == "classification":
        targets = torch.randint(classes, (size,), generator=g)
    else:
        targets = torch.rand(size, generator=g)
    return SyntheticSet(queries, contexts, targets)
