"""σ_min/σ_max of the k-prefix of every sampled ordering: the distribution a decision reads.

The profile's search finds, per ordering, where prefixes turn dependent at one tolerance.
A decision at a size k (Assumption 1 at n, general position at d) needs more: how far each
sampled k-subset sits from dependence, on the same scale as the measured error and the random
null (:mod:`memcap.numerics.decision`). For each ordering, with G the k × k Gram matrix of
its prefix A (gathered from the set's Gram matrix):

* λ_max(G) = σ_max(A)² by Lanczos on G (LANCZOS_STEPS steps, full reorthogonalisation);
* λ_min(G) = σ_min(A)² by Lanczos on G⁻¹ through a Cholesky factor (LAPACK ``dpotrf`` and
  ``dpotrs``, one thread), k³/3 flops: a quarter of a symmetric eigensolver's.

Forming G and factorising it round at about k·eps64·λ_max, so a ratio below
√(RESOLUTION·k·eps64) — or a Cholesky breakdown — is *censored* at that resolution; where the
caller needs such a prefix resolved (its zero line lies below the resolution) the rows
themselves give the ratio: R of a Householder QR of Aᵀ has A's singular values (backward
stable to k·eps64·‖A‖, not its square), and Lanczos on RᵀR and on its inverse (triangular
solves) gives σ_max and σ_min: a quarter of an SVD's cost.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from scipy.linalg import eigvalsh_tridiagonal, lapack, solve_triangular
from threadpoolctl import threadpool_limits

from memcap.numerics.tolerance import EPS64

LANCZOS_STEPS = 12
# Ratios below √(RESOLUTION·k·eps64) are not resolved through a k × k Gram matrix.
RESOLUTION = 16.0


@dataclass(frozen=True)
class PrefixRatios:
    """σ_min/σ_max of the k-prefix of each of S orderings.

    Attributes:
        k: the prefix size.
        ratio: (S,) σ_min/σ_max (an upper bound where ``censored``).
        concentration: (S,) σ_max / the largest row norm of each prefix (1 … √k).
        censored: (S,) the ratio lies at or below the Gram resolution (not resolved).
        svd: prefixes resolved from their rows (QR).
    """

    k: int
    ratio: np.ndarray
    concentration: np.ndarray
    censored: np.ndarray
    svd: int = 0

    @property
    def samples(self) -> int:
        return int(self.ratio.size)

    def head(self, samples: int) -> PrefixRatios:
        """The first ``samples`` orderings (the orderings of a smaller draw, same seed)."""
        return PrefixRatios(
            self.k,
            self.ratio[:samples],
            self.concentration[:samples],
            self.censored[:samples],
            self.svd,
        )


def resolution(k: int) -> float:
    """The smallest σ_min/σ_max a k × k float64 Gram matrix resolves."""
    return float(np.sqrt(RESOLUTION * k * EPS64))


def prefix_ratios(
    x: torch.Tensor,
    orders: torch.Tensor | np.ndarray,
    k: int,
    gram: np.ndarray | None = None,
    resolve_below: Callable[[np.ndarray], np.ndarray] | None = None,
) -> PrefixRatios:
    """σ_min/σ_max of X[order[:k]] for every ordering.

    Args:
        x: (T, d) float64 set (as the decision sees it: scaled).
        orders: (S, ≥ k) orderings of its rows.
        k: the prefix size, at most min(T, d).
        gram: x xᵀ as a NumPy array, if already formed.
        resolve_below: given the censored prefixes' concentrations, the ratio each must be
            resolved below (its zero line): where the resolution lies above it, the prefix is
            recomputed from its rows (None: they stay censored).
    """
    t, d = x.shape
    if not 1 <= k <= min(t, d):
        raise ValueError(f"k = {k} is outside 1 … min(T, d) = {min(t, d)}")
    index = np.asarray(orders)[:, :k]
    full = gram if gram is not None else (x @ x.T).cpu().numpy()
    samples = index.shape[0]
    ratio, concentration = np.empty(samples), np.empty(samples)
    censored = np.zeros(samples, dtype=bool)
    floor = resolution(k)
    with threadpool_limits(limits=1, user_api="blas"):
        for s in range(samples):
            block = full[np.ix_(index[s], index[s])]
            ratio[s], concentration[s], censored[s] = _ratio(block, floor)
    redo = np.zeros(samples, dtype=bool)
    if resolve_below is not None and censored.any():
        redo[censored] = floor > np.asarray(resolve_below(concentration[censored]))
    with threadpool_limits(limits=1, user_api="blas"):
        for s in np.flatnonzero(redo):
            ratio[s] = _rows_ratio(x[torch.as_tensor(index[s], device=x.device)])
            censored[s] = False
    return PrefixRatios(k, ratio, concentration, censored, int(redo.sum()))


def _ratio(block: np.ndarray, floor: float) -> tuple[float, float, bool]:
    """(σ_min/σ_max, concentration, censored) of one prefix from its Gram matrix."""
    k = block.shape[0]
    largest = float(np.diag(block).max())
    if largest <= 0:
        return 0.0, 1.0, False  # every row zero
    if k == 1:
        return 1.0, 1.0, False
    top = max(_lanczos_top(lambda v: block @ v, k), largest)  # λ_max ≥ every diagonal entry
    concentration = float(np.sqrt(top / largest))
    factor, info = lapack.dpotrf(block, lower=1, clean=1, overwrite_a=0)
    if info != 0:
        return floor, concentration, True
    inverse_top = _lanczos_top(lambda v: lapack.dpotrs(factor, v, lower=1)[0], k)
    ratio = float(np.sqrt(1.0 / (inverse_top * top)))
    return (floor, concentration, True) if ratio <= floor else (ratio, concentration, False)


def _rows_ratio(rows: torch.Tensor) -> float:
    """σ_min/σ_max of a k × d set of rows (k ≤ d) from the R of a QR of its transpose."""
    r = torch.linalg.qr(rows.T, mode="r")[1].cpu().numpy()  # (k, k): A's singular values
    if not np.all(np.abs(np.diag(r)) > 0):
        return 0.0  # exactly singular
    k = r.shape[0]
    top = _lanczos_top(lambda v: r.T @ (r @ v), k)
    inverse = _lanczos_top(lambda v: solve_triangular(r, solve_triangular(r, v, trans="T")), k)
    return float(np.sqrt(1.0 / (inverse * top)))


def _lanczos_top(apply: Callable[[np.ndarray], np.ndarray], k: int) -> float:
    """The largest eigenvalue of a symmetric positive semi-definite operator on R^k (Lanczos
    with full reorthogonalisation from a fixed start; exact when it exhausts R^k)."""
    steps = min(k, LANCZOS_STEPS)
    basis = np.empty((steps, k))
    start = np.cos(np.arange(1, k + 1) * 1.618)  # fixed, no zero entries, not aligned
    basis[0] = start / np.linalg.norm(start)
    alpha, beta = [], []
    for j in range(steps):
        w = apply(basis[j])
        alpha.append(float(basis[j] @ w))
        w -= basis[: j + 1].T @ (basis[: j + 1] @ w)
        w -= basis[: j + 1].T @ (basis[: j + 1] @ w)  # twice is enough (Kahan)
        norm = float(np.linalg.norm(w))
        if j + 1 == steps or norm <= 1e-14 * max(abs(a) for a in alpha):
            break
        beta.append(norm)
        basis[j + 1] = w / norm
    values = eigvalsh_tridiagonal(np.array(alpha), np.array(beta[: len(alpha) - 1]))
    return float(values[-1])
