"""Rank-tolerance rules: when a set of stored vectors counts as independent.

A k × d set is independent when σ_min > rtol·σ_max, with the numpy / torch ``matrix_rank``
default rtol = max(k, d)·eps(stored dtype). Decisions are made in float64 on the stored
values; the constants below say when float64 Gram matrices resolve the tolerance and how much
rounding margin the certified bounds allow (see docs/kruskal.md, "Tolerance").
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

# Machine epsilon of float64, the precision every decision is made in.
EPS64 = float(np.finfo(np.float64).eps)
# A squared tolerance resolves through a float64 Gram matrix when it is at least this many
# times the Gram matrix's rounding (k·eps64 for the Kruskal search); otherwise the decision
# takes a direct SVD.
GRAM_RESOLUTION = 1e3
# Allowance for the symmetric eigensolver's rounding, in r·eps64·λ_max (its backward error is
# a modest multiple of r·eps64·‖G‖₂); part of gram_eigenvalue_error.
RESOLUTION_FACTOR = 64.0
# Relative safety margin on σ_max brackets (float64 rounding of the SVD and eigvalsh).
BRACKET_SLACK = 1e-10


def dtype_eps(dtype: np.dtype | torch.dtype) -> float:
    """Machine epsilon of a floating dtype (float64's for integers)."""
    torch = sys.modules.get("torch")  # a torch dtype exists only once torch is imported
    if torch is not None and isinstance(dtype, torch.dtype):
        return torch.finfo(dtype).eps if dtype.is_floating_point else EPS64
    dtype = np.dtype(dtype)
    return float(np.finfo(dtype).eps) if np.issubdtype(dtype, np.floating) else EPS64


def matrix_rank_rtol(rows: int, cols: int, dtype: np.dtype | torch.dtype) -> float:
    """The numpy / torch ``matrix_rank`` relative tolerance: max(rows, cols)·eps(dtype)."""
    return max(rows, cols) * dtype_eps(dtype)


def gram_eigenvalue_error(rows: int, cols: int) -> float:
    """Bound, relative to λ_max, on the error of the eigenvalues of a float64 Gram matrix of a
    ``rows`` × ``cols`` matrix E (E Eᵀ or Eᵀ E, whichever is r × r with r = min(rows, cols)).

    Forming it sums m = max(rows, cols) products per entry: |ΔG| ≤ γ_{m+1}·|E||E|ᵀ entrywise,
    so ‖ΔG‖₂ ≤ γ_{m+1}·‖E‖_F² ≤ (m + 1)·eps64·r·λ_max (γ_k ≈ k·eps64 / 2; the products of
    float32 values are exact in float64). The eigensolver adds RESOLUTION_FACTOR·r·eps64·λ_max.
    By Weyl's inequality every computed eigenvalue lies within the sum of the two of the
    exact one.
    """
    r, m = min(rows, cols), max(rows, cols)
    return r * (m + 1 + RESOLUTION_FACTOR) * EPS64


def gram_resolves(tau: float, rounding: float) -> bool:
    """Whether τ² stands far enough above a Gram matrix's relative ``rounding`` to be decided
    through it (τ² ≥ GRAM_RESOLUTION·rounding)."""
    return tau * tau >= GRAM_RESOLUTION * rounding
