"""Paper B's accuracy lower bounds and the least-squares fits drawn on every AoT plot.

With a uniform prior over T input sequences and N tokens, an AoT that memorizes M
associations and guesses the rest has accuracy 1/N + (1 − 1/N)·M/T. Paper B's construction
gives M = H·d_h + d ("our lower bound"); paper A's construction in this setting gives
M = H(d_h − 1) + 1 ("previous lower bound", as paper B draws it: its theorem at n = d_h, the
head dimension; in the heads sweep d_h = d). Both are clipped at 1.

Accuracy cannot pass 1: an x whose seed mean reaches ``SATURATION`` is censored, left out of
the fits (:mod:`memcap.aot.summary`) and of the laws' tests (:mod:`memcap.aot.laws`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memcap.theory import theory_bound
from memcap.training.fits import least_squares, r_squared

SATURATION = 0.95  # a seed mean at or above this is censored by the accuracy's ceiling of 1
COEFFICIENTS = {"linear": 2, "quadratic": 3, "hinge": 3}  # per fit form (see _basis)


def chance(N: int | np.ndarray) -> np.ndarray:
    """Accuracy of a uniform guess."""
    return 1.0 / np.asarray(N, dtype=float)


def accuracy_from_memorized(memorized, N, T) -> np.ndarray:
    """1/N + (1 − 1/N)·M/T, clipped at 1."""
    N = np.asarray(N, dtype=float)
    acc = 1.0 / N + (1.0 - 1.0 / N) * np.asarray(memorized, dtype=float) / np.asarray(T)
    return np.minimum(acc, 1.0)


def our_lower_bound(N, T, H, d_h, d) -> np.ndarray:
    """Paper B: 1/N + (1 − 1/N)(H·d_h + d)/T."""
    return accuracy_from_memorized(np.asarray(H) * np.asarray(d_h) + np.asarray(d), N, T)


def previous_lower_bound(N, T, H, d_h) -> np.ndarray:
    """Paper A's construction as paper B draws it: 1/N + (1 − 1/N)(H(d_h − 1) + 1)/T.

    Paper A's theorem at n = d_h (a head of dimension d_h): the authors' plotting code passes
    the head dimension, so the d_h sweep's curve rises with d_h (in the heads sweep d_h = d).
    """
    return accuracy_from_memorized(theory_bound(np.asarray(H), np.asarray(d_h)), N, T)


@dataclass(frozen=True)
class Fit:
    """A least-squares fit y ≈ Σ coef_j · basis_j(x)."""

    form: str  # "linear", "quadratic" or "hinge" (piecewise linear with a knot)
    coefficients: tuple[float, ...]  # intercept first
    r2: float  # coefficient of determination on the fitted points
    n_points: int
    knot: float = float("nan")  # hinge position (hinge form only)

    def predict(self, x) -> np.ndarray:
        return _basis(np.asarray(x, dtype=float), self.form, self.knot) @ np.asarray(
            self.coefficients
        )

    @property
    def slope(self) -> float:
        """Linear coefficient (linear, hinge) or quadratic coefficient (quadratic)."""
        return self.coefficients[2] if self.form == "quadratic" else self.coefficients[1]

    def describe(self, x_name: str) -> str:
        c = self.coefficients
        if self.form == "linear":
            text = f"{c[0]:.3g} + {c[1]:.3g}·{x_name}"
        elif self.form == "quadratic":
            text = f"{c[0]:.3g} + {c[1]:.3g}·{x_name} + {c[2]:.3g}·{x_name}²"
        else:
            text = f"{c[0]:.3g} + {c[1]:.3g}·{x_name} + {c[2]:.3g}·max(0, {x_name}−{self.knot:g})"
        return f"{text} (R² = {self.r2:.3f})"


def _basis(x: np.ndarray, form: str, knot: float) -> np.ndarray:
    if form == "linear":
        return np.stack([np.ones_like(x), x], axis=-1)
    if form == "quadratic":
        return np.stack([np.ones_like(x), x, x**2], axis=-1)
    if form == "hinge":
        return np.stack([np.ones_like(x), x, np.maximum(0.0, x - knot)], axis=-1)
    raise ValueError(f"unknown fit form '{form}'")


def fit(x, y, form: str, knot: float = float("nan")) -> Fit:
    """Least-squares fit of ``form`` to the points (x, y), with R²."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    basis = _basis(x, form, knot)
    coef = least_squares(basis, y)
    return Fit(form, tuple(float(c) for c in coef), r_squared(y, basis @ coef), len(x), knot)
