"""The walk: after a shifted Cholesky factorisation breaks down at J, decide the prefixes
J, J + 1, … one by one without another factorisation (docs/kruskal.md, "The walk").

Each prefix k gets certified bounds on λ_min(G_k): a Rayleigh (Ritz) value from above and a
Kato–Temple bound from below, from a Krylov space of inverse iteration through the failed
factor bordered by the rows J … k.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy.linalg import blas

from memcap.numerics.tolerance import EPS64

# Inverse iterations spanning the Krylov space of a breakdown's Ritz vector (at least, at most).
MIN_KRYLOV_STEPS = 2
KRYLOV_STEPS = 5
# Prefixes decided after one breakdown before the next factorisation: at least one, more
# where a factorisation costs more than a walk step (about WALK_ROWS rows' worth), at most 8.
MAX_WALK = 8
WALK_ROWS = 320


class Border:
    """G_k − shift·I for the prefixes k ≥ J after a factorisation broke down at J, as the block
    LDLᵀ [[L, 0], [Wᵀ, I]]·diag(I, S)·[[Lᵀ, W], [0, I]] with L the failed factor's valid
    block, W = L⁻¹B and S = C − shift·I − WᵀW (B, C: the Gram entries of rows J … k)."""

    def __init__(self, factor: np.ndarray, j: int, shift: float):
        """``factor``: the F-ordered n × n output of the failed factorisation; its rows from J
        on are overwritten with those of the identity so the whole array is a triangular
        factor whose solves leave those coordinates alone."""
        size = factor.shape[0]
        factor[j - 1 :, :] = 0.0
        factor.flat[(j - 1) * (size + 1) :: size + 1] = 1.0
        self.factor = factor
        self.j = j
        self.shift = shift
        self.w = np.empty((j - 1, 0))

    def _lower_solve(self, rhs: np.ndarray, trans: int) -> np.ndarray:
        """L⁻¹·rhs (trans 0) or L⁻ᵀ·rhs (trans 1) for a vector of length J − 1."""
        if self.j == 1:
            return rhs
        padded = np.zeros(self.factor.shape[0])
        padded[: self.j - 1] = rhs
        return blas.dtrsv(self.factor, padded, lower=1, trans=trans)[: self.j - 1]

    def eigenvalue_bounds(
        self, gram: np.ndarray, k: int, levels: tuple[float, float], smax2_hi: float
    ) -> tuple[float, float] | None:
        """Certified (lower, upper) bounds on λ_min(G_k), or None when G_k may have more than
        one eigenvalue below the shift (S has as many negative eigenvalues as G_k has below
        it). The Krylov space grows until the bounds put λ_min on one side of ``levels``
        (dependence, independence) or reach KRYLOV_STEPS vectors. ``gram`` holds at least k
        rows; ``smax2_hi`` bounds λ_max(G_k) (for rounding)."""
        j = self.j
        while self.w.shape[1] < k - j + 1:
            column = self._lower_solve(gram[: j - 1, j - 1 + self.w.shape[1]], 0)
            self.w = np.column_stack([self.w, column])
        w = self.w
        s = gram[j - 1 : k, j - 1 : k] - w.T @ w
        s.flat[:: k - j + 2] -= self.shift
        values, vectors = np.linalg.eigh(s)
        rounding = 4 * k * EPS64 * smax2_hi
        if values[0] >= 0 or (values.size > 1 and values[1] <= rounding):
            return None
        g = gram[:k, :k]
        v = np.zeros(k)
        v[-1] = 1.0
        basis: list[np.ndarray] = []
        bounds = None
        for _ in range(min(KRYLOV_STEPS, k)):
            y = self._lower_solve(v[: j - 1], 0)
            z = vectors @ ((vectors.T @ (v[j - 1 :] - w.T @ y)) / values)
            v = np.concatenate([self._lower_solve(y - w @ z, 1), z])
            norm = float(np.linalg.norm(v))
            if not 0 < norm < math.inf:
                break
            v /= norm
            basis.append(v)
            if len(basis) < min(MIN_KRYLOV_STEPS, k):
                continue
            bounds = ritz_bounds(g, np.stack(basis, axis=1), self.shift, rounding)
            if bounds is None or bounds[1] <= levels[0] or bounds[0] > levels[1]:
                break
        return bounds


def ritz_bounds(
    g: np.ndarray, basis: np.ndarray, shift: float, rounding: float
) -> tuple[float, float] | None:
    """(Kato–Temple lower, Rayleigh upper) bounds on λ_min(g) from the smallest Ritz pair of
    ``g`` on span(basis), given λ₂(g) ≥ ``shift``; None if rounding left them undefined.
    ``rounding`` is the absolute error allowed on each side."""
    q, r = np.linalg.qr(basis)
    diagonal = np.abs(np.diag(r))
    q = q[:, diagonal > 1e-10 * diagonal.max()]  # drop directions the Krylov space repeats
    gq = g @ q
    _, ritz = np.linalg.eigh(q.T @ gq)
    v, gv = q @ ritz[:, 0], gq @ ritz[:, 0]
    norm2 = float(v @ v)
    rho = float(v @ gv) / norm2
    residual2 = float(np.sum((gv - rho * v) ** 2)) / norm2
    upper = rho + rounding
    gap = shift - rounding - upper
    lower = rho - rounding - residual2 / gap if gap > 0 else -math.inf
    if math.isnan(lower) or not math.isfinite(upper):
        return None
    return lower, upper


def walk(
    border: Border,
    lo: int,
    hi: int,
    tau2: float,
    bracket: Callable[[int], tuple[float, float]],
    gram: Callable[[int], np.ndarray],
) -> tuple[int, int]:
    """The window (lo, hi] holding m after deciding prefixes J, J + 1, … in turn.

    Prefix k is dependent when the shift is at most τ²·lo(k), or when its Rayleigh bound is;
    independent when its Kato–Temple bound is above τ²·hi(k), with [lo(k), hi(k)] =
    ``bracket(k)`` bounding σ_max(A_k)². ``gram(k)`` returns a Gram block of at least k rows.
    The walk stops at the first prefix neither proves.
    """
    j, shift = border.j, border.shift
    steps = min(MAX_WALK, max(1, int((border.factor.shape[0] / WALK_ROWS) ** 3)))
    for k in range(max(j, lo + 1), min(hi, j + steps - 1) + 1):
        low, high = bracket(k)
        if shift <= tau2 * low:
            return lo, k - 1
        dependent, independent = tau2 * low, tau2 * high
        bounds = border.eigenvalue_bounds(gram(k), k, (dependent, independent), high)
        if bounds is None:
            break
        below, above = bounds
        if above <= dependent:
            return lo, k - 1
        if below <= independent:
            break
        lo = k
    return lo, hi
