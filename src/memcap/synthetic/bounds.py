"""The linear fit drawn on every synthetic figure (paper A's bound is in :mod:`memcap.theory`)."""

from __future__ import annotations

import numpy as np

from memcap.training.fits import least_squares, r_squared


def linear_fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """Least-squares slope, intercept and R² of y on x (R² is NaN when y is constant)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(np.unique(x)) < 2:
        return float("nan"), float("nan"), float("nan")
    slope, intercept = least_squares(np.stack([x, np.ones_like(x)], -1), y, scale_columns=True)
    return float(slope), float(intercept), r_squared(y, slope * x + intercept)
