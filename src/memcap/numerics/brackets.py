"""Certified brackets [lo, hi] on σ_max(A)² of a prefix A of an ordering (docs/kruskal.md)."""

from __future__ import annotations

import numpy as np
import torch

from memcap.numerics.prefix import PrefixProblem
from memcap.numerics.tolerance import BRACKET_SLACK

# Power iterations before the Rayleigh quotient of σ_max².
POWER_STEPS = 1


def projection_bracket(
    problem: PrefixProblem, order: torch.Tensor, k: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Bounds (lo, hi) on σ_max(X[order[b, :k_b]])² for each ordering b, from the projection
    on X's top-p right singular vectors.

    lo: Rayleigh–Ritz value in the top-p subspace, or the largest squared row norm.
    hi: that value plus the energy outside the subspace, the Frobenius norm², or σ_1(X)².
    """
    kmax = int(k.max())
    idx = order[:, :kmax]
    mask = torch.arange(kmax, device=order.device)[None, :] < k[:, None]  # (B, kmax)
    y = problem.y[idx] * mask[..., None]  # (B, kmax, p)
    ritz = torch.linalg.eigvalsh(y.transpose(1, 2) @ y)[:, -1]  # (B,)
    norms2 = problem.norms2[idx] * mask
    lo = torch.maximum(ritz, norms2.max(dim=1).values) * (1 - BRACKET_SLACK)
    hi = torch.minimum(ritz + problem.tail2, norms2.sum(dim=1))
    hi = torch.minimum(hi, torch.full_like(hi, problem.sigma1_2)) * (1 + BRACKET_SLACK)
    return lo, hi


def gram_bracket(
    problem: PrefixProblem, gram: np.ndarray, top_vector: np.ndarray, order: np.ndarray
) -> tuple[float, float]:
    """Bounds (lo, hi) on σ_max(A)² = λ_max(G) for the prefix A = X[order] with Gram matrix G.

    lo is the Rayleigh quotient θ of G after power iteration from ``top_vector`` (A·v₁, v₁ the
    top right singular vector of X). hi is the Kato–Temple bound θ + r²/(θ − σ₂(X)²) when θ
    stands above σ₂(X)² ≥ λ₂(G), else the projection bracket's.
    """
    v = top_vector / max(float(np.linalg.norm(top_vector)), 1e-300)
    for _ in range(POWER_STEPS):
        v = gram @ v
        v /= max(float(np.linalg.norm(v)), 1e-300)  # G·v = 0 only for zero rows
    gv = gram @ v
    theta = float(v @ gv)
    residual2 = float(np.sum((gv - theta * v) ** 2))
    rounding = BRACKET_SLACK * theta
    gap = theta - problem.sigma2_2 * (1 + BRACKET_SLACK)
    if gap > 0:
        return theta - rounding, theta + residual2 / gap + rounding
    k = order.shape[0]
    rows = torch.as_tensor(order[None, :], device=problem.x.device)
    size = torch.tensor([k], device=problem.x.device)
    lo, hi = (float(b[0]) for b in projection_bracket(problem, rows, size))
    return max(lo, theta - rounding), hi
