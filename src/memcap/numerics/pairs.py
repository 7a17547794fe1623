"""All-pairs check of a query set: zero rows, duplicate, dependent and near-duplicate pairs.

Dependent pairs are exact certificates (Kruskal rank ≤ 1); their absence over all pairs proves
Kruskal rank ≥ 2.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from memcap.numerics.prefix import prefix_is_independent
from memcap.numerics.tolerance import EPS64, gram_resolves

# Row blocks of the all-pairs check.
PAIR_BLOCK = 1024


@dataclass(frozen=True)
class PairStats:
    """All-pairs checks of the query set."""

    zero_rows: int
    duplicate_pairs: int  # bitwise identical rows
    dependent_pairs: int  # pairs that are numerically dependent (duplicates included)
    near_duplicate_pairs: int  # |cosine| ≥ the configured threshold (a diagnostic)
    example: tuple[int, int] | None  # one dependent pair, if any


def pair_statistics(x: torch.Tensor, tau: float, cosine: float) -> PairStats:
    """Zero rows, duplicate, dependent and near-duplicate pairs, over all pairs of rows.

    A pair is dependent when the 2 × d matrix fails σ_min > τ·σ_max. Its 2 × 2 Gram matrix
    decides that to float64 rounding (~eps64 in λ_min/λ_max); when τ² is not far above that,
    candidate pairs are re-checked with a direct SVD.
    """
    t = x.shape[0]
    norms2 = (x * x).sum(dim=1)
    nonzero = norms2 > 0
    resolvable = gram_resolves(tau, EPS64)
    duplicates = duplicate_pairs(x[nonzero])
    dependent = near = 0
    example = None
    for start in range(0, t, PAIR_BLOCK):
        block = x[start : start + PAIR_BLOCK] @ x.T  # (b, T) inner products
        rows = torch.arange(start, start + block.shape[0], device=x.device)
        a = norms2[rows][:, None]
        c = norms2[None, :]
        upper = (torch.arange(t, device=x.device)[None, :] > rows[:, None]) & nonzero[rows][:, None]
        upper &= nonzero[None, :]
        lam_max = (a + c) / 2 + torch.sqrt(((a - c) / 2) ** 2 + block**2)
        ratio = (a * c - block**2).clamp(min=0) / lam_max**2  # λ_min / λ_max
        candidate = upper & (ratio <= tau * tau + 100 * EPS64)
        if not resolvable:
            candidate = _confirm_pairs(x, rows, candidate, tau)
        else:
            candidate &= ratio <= tau * tau
        dependent += int(candidate.sum())
        near += int((upper & (block.abs() >= cosine * torch.sqrt(a * c))).sum())
        if example is None and bool(candidate.any()):
            i, j = torch.nonzero(candidate)[0].tolist()
            example = (start + i, j)
    return PairStats(
        zero_rows=int((~nonzero).sum()),
        duplicate_pairs=duplicates,
        dependent_pairs=dependent,
        near_duplicate_pairs=near,
        example=example,
    )


def duplicate_pairs(x: torch.Tensor) -> int:
    """Pairs of bitwise identical rows."""
    if x.shape[0] < 2:
        return 0
    _, counts = torch.unique(x, dim=0, return_counts=True)
    return int((counts * (counts - 1) // 2).sum())


def _confirm_pairs(
    x: torch.Tensor, rows: torch.Tensor, candidate: torch.Tensor, tau: float
) -> torch.Tensor:
    """Keep only candidate pairs that a direct SVD of the two rows finds dependent."""
    confirmed = torch.zeros_like(candidate)
    for i, j in torch.nonzero(candidate).tolist():
        pair = torch.stack([x[rows[i]], x[j]])
        confirmed[i, j] = not prefix_is_independent(pair, tau)
    return confirmed
