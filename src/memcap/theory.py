"""Paper A's memorization bound, shared by the stages that compare against it.

Theorem 1: with H heads and context size n (head dimension d_h ≥ n, n ≤ d) one attention layer
memorizes H(n−1)+1 examples; with a shared context that is also the most it can certify. The
synthetic stage draws it, the capacity stage sets real embeddings' certified capacity beside
it, and paper B's "previous lower bound" is its count at n = d.
"""

from __future__ import annotations

import numpy as np


def theory_bound(H: int | np.ndarray, n: int | np.ndarray) -> int | np.ndarray:
    """Paper A's H(n−1)+1: the guaranteed count (Theorem 1) and the shared-context maximum."""
    return H * (n - 1) + 1
