"""Paper A's memorization bound and the linear fit drawn on every synthetic figure.

Theorem 1: with H heads and context size n (head dimension d_h ≥ n, n ≤ d) one attention layer
memorizes H(n−1)+1 examples; with a shared context that is also the most it can certify.
"""

from __future__ import annotations

import numpy as np

from memcap.training.fits import least_squares, r_squared


def theory_bound(heads: int, n: int) -> int:
    """Paper A's H(n−1)+1: the guaranteed count (Theorem 1) and the shared-context maximum."""
    return heads * (n - 1) + 1


def linear_fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """Least-squares slope, intercept and R² of y on x (R² is NaN when y is constant)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(np.unique(x)) < 2:
        return float("nan"), float("nan"), float("nan")
    slope, intercept = least_squares(np.stack([x, np.ones_like(x)], -1), y, scale_columns=True)
    return float(slope), float(intercept), r_squared(y, slope * x + intercept)
