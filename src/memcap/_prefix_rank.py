"""Length of the leading independent prefix of many orderings of one set of vectors.

For an ordering π of the rows of X (T × d) and k ≤ d, the prefix A_k = X[π[:k]] counts as
independent when σ_min(A_k) > τ·σ_max(A_k) — the ``matrix_rank`` rule with relative tolerance
τ. The ratio σ_min/σ_max of a prefix can only fall as it grows (Cauchy interlacing on the Gram
matrix), so every ordering has one number m: A_k is independent exactly when k ≤ m. This module
finds m for a batch of orderings, agreeing with a direct SVD of each prefix. Two routes:

* ``gram`` (:mod:`memcap._shifted_search`; the stored data are float32 or coarser, so τ² is far
  above float64 rounding): shifted Cholesky factorisations of the prefix Gram matrices, with
  shifts from certified brackets on σ_max(A_k), and Rayleigh-quotient certificates.
* ``qr`` (:func:`search_qr`; float64 data, or a tolerance too small to resolve through a Gram
  matrix): the R factor of a Householder QR of each prefix gives a certified upper bound on m
  through its diagonal (σ_min(R_k) ≤ min|R_ii|); exact SVDs of R_k then bisect.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

_logger = logging.getLogger(__name__)

# Relative safety margin on the σ_max brackets (float64 rounding of the SVD and eigvalsh).
BRACKET_SLACK = 1e-10


@dataclass(frozen=True)
class PrefixProblem:
    """Data shared by every ordering; built once per query set by :func:`prepare`.

    Attributes:
        x: (T, d) float64, scaled so the largest row norm is 1.
        gram: (T, T) float64 Gram matrix x xᵀ on the host, or None (then prefix Grams are
            multiplied out).
        y: (T, p) coordinates of x in its top-p right singular vectors.
        tail2: bound on σ_{p+1}(x)², the energy of x outside those p directions.
        sigma1_2: σ_1(x)², the largest squared singular value of the whole set.
        sigma2_2: σ_2(x)², an upper bound on λ_2 of every prefix Gram matrix (interlacing).
        norms2: (T,) squared row norms.
        tau2: squared relative tolerance τ².
        route: ``gram`` or ``qr``.
    """

    x: torch.Tensor
    gram: np.ndarray | None
    y: torch.Tensor
    tail2: float
    sigma1_2: float
    sigma2_2: float
    norms2: torch.Tensor
    tau2: float
    route: str


def prepare(
    x: torch.Tensor,
    singular_values: torch.Tensor,
    vh: torch.Tensor,
    tau: float,
    route: str,
    projection_dim: int = 64,
    gram_limit_bytes: int = 2**31,
) -> PrefixProblem:
    """Precompute what every ordering needs from the scaled data ``x`` and its SVD."""
    p = min(projection_dim, vh.shape[0])
    s1 = float(singular_values[0]) if singular_values.numel() else 0.0
    tail = float(singular_values[p]) if singular_values.numel() > p else 0.0
    tail += BRACKET_SLACK * s1
    t = x.shape[0]
    gram = (x @ x.T).cpu().numpy() if route == "gram" and t * t * 8 <= gram_limit_bytes else None
    s2 = float(singular_values[1]) if singular_values.numel() > 1 else 0.0
    return PrefixProblem(
        x=x,
        gram=gram,
        y=x @ vh[:p].T,
        tail2=tail * tail,
        sigma1_2=s1 * s1,
        sigma2_2=s2 * s2,
        norms2=(x * x).sum(dim=1),
        tau2=tau * tau,
        route=route,
    )


def prefix_is_independent(rows: torch.Tensor, tau: float) -> bool:
    """The reference decision: a direct float64 SVD of the rows, σ_min > τ·σ_max."""
    s = torch.linalg.svdvals(rows.to(torch.float64))
    if s.numel() < rows.shape[0] or s[0] == 0:
        return False
    return bool(s[-1] > tau * s[0])


def smax2_bracket(
    problem: PrefixProblem, order: torch.Tensor, k: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Certified bounds (lo, hi) on σ_max(X[order[b, :k_b]])² for each ordering b.

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


def bisect(lo: int, hi: int, passes: Callable[[int], bool]) -> int:
    """Largest k in [lo, hi] with ``passes(k)``, given that passing is monotone and lo passes."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if passes(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def search_qr(problem: PrefixProblem, order: torch.Tensor) -> torch.Tensor:
    """Certified diagonal bound from a batched QR, then exact SVDs of R_k to bisect."""
    rows = problem.x[order]  # (B, K, d)
    r = torch.linalg.qr(rows.transpose(1, 2), mode="r").R  # (B, K, K), A_kᵀ = Q_k R_k
    diag = torch.diagonal(r, dim1=1, dim2=2).abs()  # (B, K)
    min_diag = torch.cummin(diag, dim=1).values
    max_norm = torch.cummax(problem.norms2[order].sqrt(), dim=1).values
    tau = problem.tau2**0.5
    # σ_min(R_k) ≤ min_i |R_ii| and σ_max(R_k) ≥ max row norm: a failing bound proves dependence.
    dependent = min_diag <= tau * max_norm
    hi = torch.where(dependent.any(dim=1), dependent.float().argmax(dim=1), order.shape[1])
    m = torch.empty_like(hi)
    for i in range(order.shape[0]):
        top = int(hi[i])
        if top == 0 or _r_is_independent(r[i, :top, :top], tau):
            m[i] = top
        else:
            m[i] = bisect(0, top - 1, lambda k, i=i: _r_is_independent(r[i, :k, :k], tau))
    return m


def _r_is_independent(r: torch.Tensor, tau: float) -> bool:
    """The SVD test on a triangular factor: R_k has the singular values of the prefix A_k."""
    if r.shape[0] == 0:
        return True
    s = torch.linalg.svdvals(r)
    return bool(s[0] > 0 and s[-1] > tau * s[0])
