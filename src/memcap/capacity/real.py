"""Certified capacity of real embeddings: random attention on an extracted model × layer.

The capacity stage's computation: for H = 1 … max_H (nested heads) the singular values of Z
(:mod:`memcap.capacity.certified`) on the queries and contexts one extraction job wrote, read
against the floor the layer's measured forward error sets (:mod:`memcap.capacity.spectrum`:
the rank, its gap, whether it is one number), beside what Theorem 1 grants, min(T, H(n−1)+1),
and the ceiling min(T, H·d), which no embeddings can exceed (:mod:`memcap.capacity.ceiling`).
Two configurations: every example with its own context (``contexts: own``, one draw of the
attention), which sits at min(T, H·d) for generic embeddings since d > n, and every example
with one example's context (``contexts: shared``), where rank(Z) ≤ H(n−1)+1: the capacity there
depends on n, and a resolved rank below it measures the embeddings; a shared context with only
m < n distinct rows (Assumption 2 failing on it, e.g. a repeated token at layer 0 of a model
whose positions enter inside attention) caps it at H(m−1)+1. The shared configuration is
repeated over ``shared_contexts`` contexts × ``draws`` attention draws.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from memcap.capacity.ceiling import (
    at_ceiling,
    ceiling,
    granted,
    own_reading,
    repeated_bound,
    shared_reading,
)
from memcap.capacity.certified import (
    ArrayLike,
    input_precision,
    own_context_features,
    random_attention_weights,
    shared_context_spectra,
)
from memcap.capacity.spectrum import RankReading, Spectrum, error_floor, read_rank
from memcap.training.config import derive_seed


def real_capacity_rows(
    queries: ArrayLike,
    contexts: ArrayLike,
    max_H: int,
    d_h: int | None,
    max_T: int | None,
    seed: int,
    draws: int = 1,
    shared_contexts: int = 1,
    spread_H: Sequence[int] | None = None,
    delta: float | None = None,
    repeat_cause: str | None = None,
) -> list[dict[str, Any]]:
    """Certified capacity of real embeddings for H = 1 … ``max_H`` (nested heads).

    Args:
        queries: (T, d), e.g. a memory-mapped ``queries.npy``.
        contexts: (T, n, d).
        max_H: the largest H.
        d_h: the head dimension of the random attention; None uses d_h = n, Theorem 1's regime.
        max_T: use a seeded random subset of at most this many examples.
        seed: seed of the subset, of the shared contexts and of the attention draws.
        draws: attention draws per shared context (the own contexts take the first).
        shared_contexts: contexts shared in turn by every example; the first is the first
            example's, the others a seeded choice.
        spread_H: the H (at most ``max_H``) of every shared context and draw after
            the first, which takes every H; None: every H.
        delta: the layer's measured forward error (:func:`~memcap.capacity.spectrum.
            forward_error`); None reads the ranks against the stored dtype's rounding alone.
        repeat_cause: why the layer's contexts can repeat rows by construction
            (:func:`memcap.extract.positions.repeated_rows`), named in the shared readings.

    Returns:
        One record per configuration, shared context, draw and H: the sizes, what Theorem 1
        grants (``bound`` = min(T, H(n−1)+1), NaN unless d_h ≥ n and n ≤ d), the ceiling
        min(T, H·d), the rank read against the floor (:meth:`RankReading.record`),
        ``at_ceiling``, ``contexts`` (own or shared), ``shared_example`` (the example whose
        context is shared; −1 for own), ``draw``, ``delta``, ``input_eps``, ``reading`` and
        ``shared_context`` (0 for the first example's context, −1 for own).
    """
    total, n, d = contexts.shape
    index = subsample(total, max_T, seed)
    if len(index) < total:
        queries, contexts = np.asarray(queries[index]), np.asarray(contexts[index])
    T, d_h = len(index), n if d_h is None else d_h
    # The embeddings are rounded to their stored dtype (float32) and carry the forward pass's
    # error: Z's singular values at that level could be the error alone and do not count.
    eps = input_precision(queries, contexts)
    layer = _Layer(T, total, n, d, d_h, eps, delta, repeat_cause or "")
    H_values = list(range(1, max_H + 1))
    seeds = draw_seeds(seed, draws)
    features = own_context_features(queries, contexts, max_H, d_h, seeds[0])
    rows, reached = [], None
    for h in H_values:
        if reached is None:
            z = features[:, :h].reshape(T, h * d)
            reading = layer.read(Spectrum.of(torch.linalg.svdvals(z).numpy(), (T, h * d)))
            reached = reading if reading.rank_high == T else None
        else:  # nested heads keep rank T once reached: no SVD, no edge
            reading = RankReading(T, reached.rank_low, math.nan, math.nan, math.nan)
        rows.append(layer.row(h, reading, "own", -1, -1, 0, -1))
    del features
    spread = H_values if spread_H is None else sorted(set(spread_H) & set(H_values))
    positions = shared_positions(T, shared_contexts, seed)
    for draw, draw_seed in enumerate(seeds):
        weights = random_attention_weights(d, max_H, d_h, draw_seed)
        for context, position in enumerate(positions):
            some = H_values if context == draw == 0 else spread
            if not some:
                continue
            shared = np.asarray(contexts[position])  # (n, d)
            distinct = len(np.unique(shared, axis=0))  # bitwise: equal rows prove rank < n
            spectra = shared_context_spectra(queries, shared, some, weights)
            for h, spectrum in zip(some, spectra, strict=True):
                reading = layer.read(spectrum)
                example = int(index[position])
                rows.append(layer.row(h, reading, "shared", example, context, draw, distinct))
    return rows


@dataclass(frozen=True)
class _Layer:
    """The sizes of one layer's capacity run and the error its ranks are read against."""

    T: int
    total: int
    n: int
    d: int
    d_h: int
    input_eps: float
    delta: float | None
    repeat_cause: str

    def read(self, spectrum: Spectrum) -> RankReading:
        return read_rank(spectrum, error_floor(spectrum, self.input_eps, self.delta))

    def row(self, h: int, reading: RankReading, which: str, example: int, context: int,
            draw: int, distinct: int) -> dict[str, Any]:  # fmt: skip
        """One table row: own (``example`` = ``context`` = ``distinct`` = −1) or a shared
        context's run (``distinct``: its distinct rows)."""
        t, n, d = self.T, self.n, self.d
        low, high = reading.rank_low, reading.rank_high
        words = (
            own_reading(low, high, t, h, d)
            if which == "own"
            else shared_reading(low, high, t, h, n, d, distinct, self.repeat_cause)
        )
        theorem = self.d_h >= n and n <= d
        edge = reading.record()
        return {
            "H": h,
            "certified": edge.pop("certified"),
            "T": t,
            "T_total": self.total,
            "n": n,
            "d": d,
            "d_h": self.d_h,
            "bound": float(granted(t, h, n)) if theorem else math.nan,
            "ceiling": ceiling(t, h, d),
            "last_kept": edge.pop("last_kept"),
            "first_dropped": edge.pop("first_dropped"),
            "at_ceiling": at_ceiling(high, t, h, d),
            "contexts": which,
            "shared_example": example,
            "shared_context": context,
            **edge,
            "draw": draw,
            "delta": math.nan if self.delta is None else self.delta,
            "input_eps": self.input_eps,
            "reading": words,
            "shared_distinct_rows": distinct,
            "distinct_bound": repeated_bound(t, h, distinct) if distinct > 0 else math.nan,
            "repeat_cause": self.repeat_cause,
        }


def draw_seeds(seed: int, draws: int) -> list[int]:
    """The attention weights' seed of each draw, derived from the run's seed."""
    return [derive_seed(seed, "capacity draw", k) for k in range(draws)]


def shared_positions(T: int, count: int, seed: int) -> list[int]:
    """Which of the examples used share their context in turn: the first, then a seeded choice
    of ``count − 1`` others (all of them when there are fewer)."""
    others = np.random.default_rng(derive_seed(seed, "capacity contexts")).permutation(
        np.arange(1, T)
    )
    return [0, *(int(p) for p in others[: max(count - 1, 0)])]


def subsample(total: int, limit: int | None, seed: int) -> np.ndarray:
    """Sorted indices of at most ``limit`` of ``total`` examples, drawn without replacement."""
    if limit is None or limit >= total:
        return np.arange(total)
    return np.sort(np.random.default_rng(seed).choice(total, size=limit, replace=False))
