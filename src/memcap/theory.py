"""Paper A's memorization bound, shared by the stages that compare against it.

Theorem 1: with H heads and context size n (head dimension d_h ≥ n, n ≤ d) one attention layer
memorizes H(n−1)+1 examples; with a shared context that is also the most it can certify. The
synthetic stage draws it, the capacity stage sets real embeddings' certified capacity beside
it, and paper B's "previous lower bound" is its count at n = d.

Below d_h = n the theorem gives only the order Ω(H·min(n, d_h)). The count its construction
reaches there, H(d_h−1)+1, is paper B's statement of paper A's construction (Dana et al.,
AISTATS 2025, "previous lower bound"); :func:`construction_count` gives it, labelled as that
by :func:`bound_kind`, and never the count at n.
"""

from __future__ import annotations

import numpy as np

THEOREM = "Theorem 1: H(n−1)+1"
CONSTRUCTION = "construction at d_h < n: H(d_h−1)+1 (paper B's statement of paper A's)"


def theory_bound(H: int | np.ndarray, n: int | np.ndarray) -> int | np.ndarray:
    """Paper A's H(n−1)+1: the guaranteed count (Theorem 1, d_h ≥ n) and the shared-context
    maximum."""
    return H * (n - 1) + 1


def construction_count(H: int, n: int, d_h: int) -> int:
    """H(min(n, d_h)−1)+1: Theorem 1's count where d_h ≥ n, its construction's below."""
    return int(theory_bound(H, min(n, d_h)))


def bound_kind(n: int, d_h: int) -> str:
    """What :func:`construction_count` is at (n, d_h): Theorem 1's count, or the construction's."""
    return THEOREM if d_h >= n else CONSTRUCTION
