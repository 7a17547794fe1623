"""Two-sided equilibration: the scaling every rank decision is made on by default.

Exact linear independence (a subset of queries, the rows of a context) does not change when
each coordinate is multiplied by a positive factor common to all vectors and each vector by
its own: X ↦ D_r X D_c with positive diagonal D_r, D_c (one attention layer absorbs both into
W_Q, W_K, W_V). The ``matrix_rank`` tolerance, relative to σ_max, does change: a few
coordinates with massive activations or a few high-norm tokens make σ_max large and put
genuinely independent vectors under rtol·σ_max. Stored float32 values carry an error relative
to each entry (|δx_ij| ≤ eps·|x_ij|), which D_r X D_c preserves; equilibrating first turns
that entrywise error into the normwise one the tolerance assumes, as LAPACK's ``geequ`` does
before a rank decision.

The scaling is the Sinkhorn–Knopp balance of the squared entries: D_r, D_c such that every
nonzero row of D_r X D_c has unit 2-norm and every nonzero column the same 2-norm
√(m'/d') (m', d' the nonzero rows and columns). For a matrix with total support (every dense
matrix) that balanced matrix is unique, so it is the same for X and for any D_r X D_c: every
decision taken on it is invariant under both scalings, up to the iteration's tolerance. Zero
rows and zero columns are left at zero (a zero vector stays a proof of dependence).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch

_logger = logging.getLogger(__name__)

SCALINGS = ("equilibrate", "none")
# Largest deviation of a balanced row norm² from 1 at which the iteration stops; far below the
# float32 rounding (1.2e-7) every decision is made against.
BALANCE_TOL = 1e-12
MAX_ITERATIONS = 2000


@dataclass(frozen=True)
class Balance:
    """A two-sided equilibration of a (…, m, d) batch.

    Attributes:
        values: the balanced float64 matrices D_r X D_c.
        iterations: Sinkhorn–Knopp sweeps taken.
        residual: largest |row norm² − 1| over the nonzero rows of the batch.
        tol: the residual it was asked to reach.
        rows, cols: the diagonals of D_r (…, m) and D_c (…, d).
    """

    values: torch.Tensor
    iterations: int
    residual: float
    tol: float = BALANCE_TOL
    rows: torch.Tensor | None = None
    cols: torch.Tensor | None = None

    @property
    def converged(self) -> bool:
        return self.residual <= self.tol


def check_scaling(scaling: str) -> str:
    """``scaling`` itself, or a ValueError naming the choices."""
    if scaling not in SCALINGS:
        raise ValueError(f"scaling must be one of {SCALINGS}, not {scaling!r}")
    return scaling


def balance(
    x: torch.Tensor, tol: float = BALANCE_TOL, max_iterations: int = MAX_ITERATIONS
) -> Balance:
    """Sinkhorn–Knopp balance of the squared entries of every (m, d) matrix of a batch.

    On the CPU each matrix is balanced on its own (:func:`_balance_one`, NumPy: one matrix
    stays in cache through its sweeps, and stops at its own convergence); elsewhere the batch
    is balanced at once (:func:`_balance_batch`, torch). Both reach the same balanced matrix
    to within the tolerance (tests/numerics/test_numerics_equilibrate.py).

    Args:
        x: (m, d) or (B, m, d) values (any float dtype; the result is float64).
        tol: stop when every nonzero row norm² is within ``tol`` of 1.
        max_iterations: at most this many sweeps (a matrix without total support converges
            slowly; the scaling is still positive and rank-preserving, only not unique).
    """
    values = x.to(torch.float64)
    if values.device.type == "cpu" and values.numel():
        matrices = values.reshape(-1, *values.shape[-2:]).numpy()
        parts = [_balance_one(matrix, tol, max_iterations) for matrix in matrices]
        rows = torch.from_numpy(np.stack([p[0] for p in parts]).reshape(values.shape[:-1]))
        cols = torch.from_numpy(
            np.stack([p[1] for p in parts]).reshape(*values.shape[:-2], values.shape[-1])
        )
        sweeps, residual = max(p[2] for p in parts), max(p[3] for p in parts)
    else:
        rows, cols, sweeps, residual = _balance_batch(values, tol, max_iterations)
    balanced = values * rows.unsqueeze(-1) * cols.unsqueeze(-2)
    result = Balance(balanced, sweeps, residual, tol, rows, cols)
    if not result.converged:
        _logger.warning(
            "equilibration stopped after %d sweeps at residual %.1e (> %.0e): the scaling is "
            "rank-preserving but not exactly unique", sweeps, residual, tol,
        )  # fmt: skip
    return result


def _balance_one(
    x: np.ndarray, tol: float, max_iterations: int
) -> tuple[np.ndarray, np.ndarray, int, float]:
    """One float64 (m, d) matrix: the row and column scales (square roots taken), the sweeps
    and the residual."""
    squared = x * x
    rows_nz = squared.sum(axis=1) > 0
    cols_nz = squared.sum(axis=0) > 0
    target = rows_nz.sum() / max(int(cols_nz.sum()), 1)
    col = target * _np_inverse(squared.sum(axis=0), cols_nz)
    row_sums = squared @ col
    residual, sweeps = float("inf"), 0
    for sweeps in range(1, max_iterations + 1):  # noqa: B007 - the count is reported
        row = _np_inverse(row_sums, rows_nz)
        col = target * _np_inverse(row @ squared, cols_nz)
        row_sums = squared @ col
        deviation = np.abs(row * row_sums - 1.0)[rows_nz]
        residual = float(deviation.max()) if deviation.size else 0.0
        if residual <= tol:
            break
    return np.sqrt(row), np.sqrt(col), sweeps, residual


def _balance_batch(
    values: torch.Tensor, tol: float, max_iterations: int
) -> tuple[torch.Tensor, torch.Tensor, int, float]:
    """A float64 (…, m, d) batch at once (torch, on its device): the row and column scales
    (square roots taken), the sweeps and the batch's largest residual."""
    squared = values * values  # (…, m, d)
    rows_nz = squared.sum(dim=-1) > 0  # (…, m)
    cols_nz = squared.sum(dim=-2) > 0  # (…, d)
    m_nz = rows_nz.sum(dim=-1, keepdim=True).to(values.dtype)
    target = m_nz / cols_nz.sum(dim=-1, keepdim=True).clamp(min=1).to(values.dtype)
    col = target * _inverse(squared.sum(dim=-2), cols_nz)
    # Both products as a row vector times a contiguous matrix: B·c = cᵀ·Bᵀ and Bᵀ·r = rᵀ·B
    # (a batched matrix-vector product through a transposed view runs several times slower).
    squared_t = squared.transpose(-1, -2).contiguous()  # (…, d, m)
    residual, sweeps = float("inf"), 0
    row_sums = _times(col, squared_t)  # (…, m): B·c, reused by the next sweep's row step
    for sweeps in range(1, max_iterations + 1):  # noqa: B007 - the count is reported
        row = _inverse(row_sums, rows_nz)
        col = target * _inverse(_times(row, squared), cols_nz)
        row_sums = _times(col, squared_t)
        norms = row * row_sums
        residual = float((norms - 1.0).abs().where(rows_nz, 0.0).max()) if norms.numel() else 0.0
        if residual <= tol:
            break
    return row.sqrt(), col.sqrt(), sweeps, residual


def scaled_for_rank(x: torch.Tensor, scaling: str) -> torch.Tensor:
    """The float64 values a rank decision is made on: balanced, or as stored (``none``)."""
    if check_scaling(scaling) == "none":
        return x.to(torch.float64)
    return balance(x).values


def _times(vector: torch.Tensor, matrix: torch.Tensor) -> torch.Tensor:
    """Batched row vector times matrix: (…, k) · (…, k, l) → (…, l)."""
    return (vector.unsqueeze(-2) @ matrix).squeeze(-2)


def _inverse(sums: torch.Tensor, nonzero: torch.Tensor) -> torch.Tensor:
    """1 / sums where ``nonzero``, else 0 (zero rows and columns keep a zero scale)."""
    return torch.where(nonzero, 1.0 / sums.where(nonzero, 1.0), 0.0)


def _np_inverse(sums: np.ndarray, nonzero: np.ndarray) -> np.ndarray:
    """:func:`_inverse` in NumPy."""
    return np.where(nonzero, 1.0 / np.where(nonzero, sums, 1.0), 0.0)
