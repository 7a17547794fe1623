"""The QR route of the prefix search, for float64 data or tolerances a Gram matrix cannot
resolve: a certified bound from a batched Householder QR, then exact SVDs of R_k bisect."""

from __future__ import annotations

import torch

from memcap.numerics.prefix import PrefixProblem, bisect


def search_qr(problem: PrefixProblem, order: torch.Tensor) -> torch.Tensor:
    """m for each ordering (B, K) of ``order``, agreeing with a direct SVD of each prefix."""
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
