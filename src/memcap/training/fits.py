"""Least-squares fits with R², shared by both papers' scaling-law tables."""

from __future__ import annotations

import numpy as np


def least_squares(basis: np.ndarray, y: np.ndarray, scale_columns: bool = False) -> np.ndarray:
    """Coefficients c minimising ‖basis · c − y‖² (score them with :func:`r_squared`).

    Args:
        basis: (points, terms) design matrix.
        y: (points,) observations.
        scale_columns: solve with unit-norm columns and rank cut-off points · ε, as
            :func:`numpy.polyfit` does (better conditioned for polynomial bases).

    Returns:
        (terms,) coefficients.
    """
    basis, y = np.asarray(basis, dtype=float), np.asarray(y, dtype=float)
    if scale_columns:
        scale = np.sqrt((basis * basis).sum(axis=0))
        rcond = len(y) * np.finfo(float).eps
        return np.linalg.lstsq(basis / scale, y, rcond)[0] / scale
    return np.linalg.lstsq(basis, y, rcond=None)[0]


def r_squared(y: np.ndarray, fitted: np.ndarray) -> float:
    """Coefficient of determination of ``fitted`` for ``y`` (NaN when y is constant)."""
    y = np.asarray(y, dtype=float)
    residual = float(((y - fitted) ** 2).sum())
    total = float(((y - y.mean()) ** 2).sum())
    return 1.0 - residual / total if total > 0 else float("nan")
