"""Length of the leading independent prefix of many orderings of one set of vectors.

For an ordering π of the rows of X (T × d) and k ≤ d, the prefix A_k = X[π[:k]] counts as
independent when σ_min(A_k) > τ·σ_max(A_k) — the ``matrix_rank`` rule with relative tolerance
τ. The ratio σ_min/σ_max of a prefix can only fall as it grows (Cauchy interlacing on the Gram
matrix), so every ordering has one number m: A_k is independent exactly when k ≤ m. This module
finds m for a batch of orderings, agreeing with a direct SVD of each prefix:

* ``gram`` route (the stored data are float32 or coarser, so τ² ≫ eps64): with G = A Aᵀ in
  float64, A_k is independent iff λ_min(G_k) > τ²·λ_max(G_k). One Cholesky factorisation of
  G − cI tests λ_min(G_k) > c for *every* prefix k at once (it breaks down at the first k where
  it fails), so a few shifted factorisations, with shifts taken from certified brackets on
  σ_max(A_k), pin m down. Only an ordering whose ratio sits inside the σ_max bracket is settled
  by an exact SVD of the prefix.
* ``qr`` route (float64 data, or a tolerance too small to resolve through a Gram matrix): the R
  factor of a Householder QR of the prefix gives a certified upper bound on m through its
  diagonal (σ_min(R_k) ≤ min|R_ii|); exact SVDs of R_k then bisect.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

_logger = logging.getLogger(__name__)

# Shifted-Cholesky rounds before the remaining undecided orderings go to exact SVDs.
MAX_ROUNDS = 10
# Relative safety margin on the σ_max brackets (float64 rounding of the SVD and eigvalsh).
BRACKET_SLACK = 1e-10


@dataclass(frozen=True)
class PrefixProblem:
    """Data shared by every ordering; built once per query set by :func:`prepare`.

    Attributes:
        x: (T, d) float64, scaled so the largest row norm is 1.
        gram: (T, T) float64 Gram matrix x xᵀ, or None (then prefix Grams are multiplied out).
        y: (T, p) coordinates of x in its top-p right singular vectors.
        tail2: bound on σ_{p+1}(x)², the energy of x outside those p directions.
        sigma1_2: σ_1(x)², the largest squared singular value of the whole set.
        norms2: (T,) squared row norms.
        tau2: squared relative tolerance τ².
        route: ``gram`` or ``qr``.
    """

    x: torch.Tensor
    gram: torch.Tensor | None
    y: torch.Tensor
    tail2: float
    sigma1_2: float
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
    gram = x @ x.T if route == "gram" and t * t * 8 <= gram_limit_bytes else None
    return PrefixProblem(
        x=x,
        gram=gram,
        y=x @ vh[:p].T,
        tail2=tail * tail,
        sigma1_2=s1 * s1,
        norms2=(x * x).sum(dim=1),
        tau2=tau * tau,
        route=route,
    )


def leading_independent(problem: PrefixProblem, order: torch.Tensor) -> torch.Tensor:
    """m for each ordering: the number of leading rows that are independent.

    Args:
        problem: from :func:`prepare`.
        order: (B, K) row indices; the first K entries of B orderings. m is capped at K.

    Returns:
        (B,) int64 tensor of m values on the problem's device.
    """
    if order.shape[1] == 0:
        return torch.zeros(order.shape[0], dtype=torch.long, device=order.device)
    if problem.route == "gram":
        return _search_gram(problem, order)
    return _search_qr(problem, order)


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


def _prefix_grams(problem: PrefixProblem, order: torch.Tensor) -> torch.Tensor:
    """(B, K, K) Gram matrices of the ordered prefixes."""
    if problem.gram is not None:
        t = problem.gram.shape[0]
        flat = order[:, :, None] * t + order[:, None, :]  # (B, K, K) indices into gram
        return problem.gram.reshape(-1)[flat]
    rows = problem.x[order]  # (B, K, d)
    return rows @ rows.transpose(1, 2)


def _first_failure(grams: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """First k (1-based) with λ_min(G_k) ≤ shift, per batch entry; n + 1 if none up to n."""
    n = grams.shape[-1]
    eye = torch.eye(n, dtype=grams.dtype, device=grams.device)
    _, info = torch.linalg.cholesky_ex(grams - shift[:, None, None] * eye)
    return torch.where(info == 0, torch.full_like(info, n + 1), info).long()


def _search_gram(problem: PrefixProblem, order: torch.Tensor) -> torch.Tensor:
    """Root-find the crossing of λ_min(G_k) and τ²σ_max(A_k)² with shifted Cholesky runs.

    A run with shift c first breaks down at J: λ_min(G_k) > c for k < J and ≤ c for k ≥ J.
    With [lo², hi²] a certified bracket on σ_max(A_t)² at a test point t:

    * an *independence test* (c = τ²·hi²(t)) proves every k < J with k ≤ t independent, and
      every k ≥ max(J, t + 1) dependent where τ²·lo²(k) ≥ c;
    * a *dependence test* (c = τ²·lo²(t)) proves every k ≥ max(J, t) dependent, and every
      k ≤ min(J, t) − 1 independent where τ²·hi²(k) ≤ c.

    Each round narrows the window [lo, hi] that holds m; test points follow a secant estimate
    of the crossing once two breakdowns are known. A window of width one is tried with both
    tests; what is left (the ratio inside the σ_max bracket) goes to an exact SVD.
    """
    b, kmax = order.shape
    dev = order.device
    grams = _prefix_grams(problem, order)
    lo = torch.zeros(b, dtype=torch.long, device=dev)
    hi = torch.full((b,), kmax, dtype=torch.long, device=dev)
    edge_tries = torch.zeros(b, dtype=torch.long, device=dev)
    history: list[tuple[torch.Tensor, ...]] = []  # (J or 0, log c, t) per round, for all b
    for round_ in range(MAX_ROUNDS):
        active = torch.nonzero((lo < hi) & (edge_tries < 2)).flatten()
        if active.numel() == 0:
            break
        past = [[h[active] for h in record] for record in history]
        t, dep = _test_point(round_, lo[active], hi[active], edge_tries[active], past)
        edge_tries[active] += (hi[active] - lo[active] == 1).long()
        lo2, hi2 = smax2_bracket(problem, order[active], t)
        shift = problem.tau2 * torch.where(dep, lo2, hi2)
        n = int(torch.clamp(hi[active] + 1, max=kmax).max())
        j = _first_failure(grams[active, :n, :n], shift)
        failed = j <= n
        # The other end each test can prove, checked against the bracket there.
        k2 = torch.where(dep, torch.minimum(j, t) - 1, torch.maximum(j, t + 1))
        k2c = k2.clamp(1, kmax)
        lo2_k2, hi2_k2 = smax2_bracket(problem, order[active], k2c)
        new_lo = torch.where(dep, k2, torch.minimum(j - 1, t))
        lo_ok = ~dep | ((k2 >= 1) & (problem.tau2 * hi2_k2 <= shift))
        new_hi = torch.where(dep, torch.maximum(j, t) - 1, k2 - 1)
        hi_ok = failed & (dep | ((k2 <= kmax) & (problem.tau2 * lo2_k2 >= shift)))
        lo[active] = torch.where(lo_ok, torch.maximum(lo[active], new_lo), lo[active])
        hi[active] = torch.where(hi_ok, torch.minimum(hi[active], new_hi), hi[active])
        record = tuple(torch.zeros(b, dtype=v.dtype, device=dev) for v in (j, shift, t))
        record[0][active] = torch.where(failed, j, torch.zeros_like(j))
        record[1][active] = torch.log(shift)
        record[2][active] = t
        history.append(record)
    undecided = torch.nonzero(lo < hi).flatten().tolist()
    if undecided:
        _logger.debug("%d of %d orderings settled by exact SVD", len(undecided), b)
    tau = problem.tau2**0.5
    for i in undecided:
        lo[i] = _bisect_exact(problem.x[order[i]], int(lo[i]), int(hi[i]), tau)
    return lo


def _test_point(
    round_: int,
    lo: torch.Tensor,
    hi: torch.Tensor,
    edge_tries: torch.Tensor,
    history: list[list[torch.Tensor]],
) -> tuple[torch.Tensor, torch.Tensor]:
    """Next test point and whether it is a dependence test, per ordering.

    The window's top first; then a secant estimate of the crossing from the last two
    breakdowns, or the window's bottom; a window of width one gets a dependence test, then an
    independence test.
    """
    if round_ == 0:
        return hi.clone(), torch.zeros_like(lo, dtype=torch.bool)
    guess = lo + 1
    if len(history) >= 2:
        (j1, c1, _), (j2, c2, t2) = history[-2], history[-1]
        ok = (j1 > 0) & (j2 > 0) & (j1 != j2)
        # A breakdown at J under shift c puts log λ_min(G_k) ≈ log c at k = J − ½.
        slope = (c2 - c1) / (j2 - j1).to(c1.dtype)
        ok &= torch.isfinite(slope) & (slope < 0)
        # τ²σ_max(A_k)² grows about like k near the crossing: d log / dk ≈ 1 / k, through
        # log c at the test point t2 (c was τ²σ_max(A_t2)²).
        k2 = j2.to(c2.dtype) - 0.5
        t2f = t2.to(c2.dtype).clamp(min=1.0)
        growth = 1.0 / t2f
        crossing = (slope * k2 - growth * t2f) / (slope - growth)
        secant = torch.floor(torch.nan_to_num(crossing, nan=0.0)).long()
        guess = torch.where(ok, secant, guess)
    t = torch.minimum(torch.maximum(guess, lo + 1), hi)
    edge = hi - lo == 1
    return torch.where(edge, lo + 1, t), edge & (edge_tries == 0)


def _bisect_exact(rows: torch.Tensor, lo: int, hi: int, tau: float) -> int:
    """Largest k in [lo, hi] whose prefix passes the direct SVD test, given lo passes."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if prefix_is_independent(rows[:mid], tau):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _search_qr(problem: PrefixProblem, order: torch.Tensor) -> torch.Tensor:
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
            m[i] = _bisect_r(r[i], 0, top - 1, tau)
    return m


def _r_is_independent(r: torch.Tensor, tau: float) -> bool:
    s = torch.linalg.svdvals(r)
    return bool(s[0] > 0 and s[-1] > tau * s[0])


def _bisect_r(r: torch.Tensor, lo: int, hi: int, tau: float) -> int:
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _r_is_independent(r[:mid, :mid], tau):
            lo = mid
        else:
            hi = mid - 1
    return lo
