"""Certified capacity of real embeddings: random attention on an extracted model × layer.

The capacity stage's computation: for H = 1 … max_heads (nested heads, one random draw) the
certified capacity rank(Z) of :mod:`memcap.capacity.certified` on the queries and contexts
one extraction job wrote, beside Theorem 1's H(n−1)+1 and the ceiling min(T, H·d), which no
embeddings can exceed (:mod:`memcap.capacity.ceiling`). Two configurations: every example
with its own context (``contexts: own``), which sits at min(T, H·d) for generic embeddings
since d > n, and every example with the first example's context (``contexts: shared``),
where rank(Z) ≤ H(n−1)+1 < min(T, H·d) until H(n−1)+1 reaches T: the capacity there depends
on n, and a rank below H(n−1)+1 measures the embeddings (the shared context's rank, the
queries' spread).
"""

from __future__ import annotations

import numpy as np

from memcap.capacity.ceiling import at_ceiling, ceiling
from memcap.capacity.certified import (
    ArrayLike,
    certified_capacity_curve,
    input_precision,
    shared_context_curve,
)
from memcap.theory import theory_bound


def real_capacity_rows(
    queries: ArrayLike,
    contexts: ArrayLike,
    max_heads: int,
    head_dim: int | None,
    max_examples: int | None,
    seed: int,
) -> list[dict[str, float]]:
    """Certified capacity of real embeddings for H = 1 … ``max_heads`` (nested heads).

    Args:
        queries: (T, d), e.g. a memory-mapped ``queries.npy``.
        contexts: (T, n, d).
        max_heads: the largest H.
        head_dim: d_h of the random attention; None uses d_h = n, Theorem 1's regime.
        max_examples: use a seeded random subset of at most this many examples.
        seed: seed of the subset and of the random attention weights.

    Returns:
        One record per configuration (own contexts, then one shared context) and H: certified
        capacity, the sizes, the singular values at the rank's edge, the ceiling min(T, H·d)
        and Theorem 1's H(n−1)+1 (NaN unless d_h ≥ n and n ≤ d), ``at_ceiling`` (certified =
        ceiling: the row reports the sizes, not the data), ``contexts`` (own or shared) and
        ``shared_example`` (the example whose context is shared; −1 for own).
    """
    total, n, d = contexts.shape
    index = subsample(total, max_examples, seed)
    if len(index) < total:
        queries, contexts = np.asarray(queries[index]), np.asarray(contexts[index])
    dh = n if head_dim is None else head_dim
    heads = list(range(1, max_heads + 1))
    # The embeddings are rounded to their stored dtype (float32): Z's singular values at that
    # level could be rounding alone and do not count.
    precision = input_precision(queries, contexts)
    own = certified_capacity_curve(queries, contexts, heads, dh, seed, input_eps=precision)
    shared = shared_context_curve(queries, contexts[0], heads, dh, seed, input_eps=precision)
    examples = len(index)
    return [
        {
            "H": h,
            "certified": r.rank,
            "T": examples,
            "T_total": total,
            "n": n,
            "d": d,
            "d_h": dh,
            "bound": float(theory_bound(h, n)) if dh >= n and n <= d else float("nan"),
            "ceiling": ceiling(examples, h, d),
            "last_kept": r.last_kept,
            "first_dropped": r.first_dropped,
            "at_ceiling": at_ceiling(r.rank, examples, h, d),
            "contexts": which,
            "shared_example": int(index[0]) if which == "shared" else -1,
        }
        for which, ranks in (("own", own), ("shared", shared))
        for h, r in zip(heads, ranks, strict=True)
    ]


def subsample(total: int, limit: int | None, seed: int) -> np.ndarray:
    """Sorted indices of at most ``limit`` of ``total`` examples, drawn without replacement."""
    if limit is None or limit >= total:
        return np.arange(total)
    return np.sort(np.random.default_rng(seed).choice(total, size=limit, replace=False))
