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
MAX_ROUNDS = 16
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


@dataclass(frozen=True)
class SearchHint:
    """What earlier batches learnt about where prefixes turn dependent (speed only).

    Attributes:
        start: a typical m, the first test point.
        slope: a typical d log λ_min(G_k) / dk near the crossing (negative), or None.
    """

    start: int
    slope: float | None = None


def leading_independent(
    problem: PrefixProblem, order: torch.Tensor, hint: SearchHint | None = None
) -> tuple[torch.Tensor, SearchHint | None]:
    """m for each ordering: the number of leading rows that are independent.

    Args:
        problem: from :func:`prepare`.
        order: (B, K) row indices; the first K entries of B orderings. m is capped at K.
        hint: from an earlier batch of the same problem; changes the work, not the result.

    Returns:
        (B,) int64 tensor of m values on the problem's device, and a hint for the next batch.
    """
    if order.shape[1] == 0:
        return torch.zeros(order.shape[0], dtype=torch.long, device=order.device), hint
    if problem.route == "gram":
        return _search_gram(problem, order, hint)
    return _search_qr(problem, order), None


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


class _PrefixGrams:
    """Gram matrices of the ordered prefixes, gathered (and grown) only as far as needed."""

    def __init__(self, problem: PrefixProblem, order: torch.Tensor) -> None:
        self.problem = problem
        self.order = order
        self.data = order.new_empty((order.shape[0], 0, 0), dtype=torch.float64)

    def leading(self, rows: torch.Tensor, n: int) -> torch.Tensor:
        """A fresh (len(rows), n, n) copy of the leading blocks."""
        size = self.data.shape[-1]
        if n > size:
            size = min(self.order.shape[1], max(n, size + size // 2))
            self.data = _gather_grams(self.problem, self.order[:, :size])
        return self.data[rows, :n, :n]


def _gather_grams(problem: PrefixProblem, order: torch.Tensor) -> torch.Tensor:
    """(B, K, K) Gram matrices of the ordered prefixes."""
    if problem.gram is None:
        rows = problem.x[order]  # (B, K, d)
        return rows @ rows.transpose(1, 2)
    out = problem.gram.new_empty((order.shape[0], order.shape[1], order.shape[1]))
    for b, idx in enumerate(order):
        torch.index_select(problem.gram.index_select(0, idx), 1, idx, out=out[b])
    return out


def _first_failure(grams: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """First k (1-based) with λ_min(G_k) ≤ shift, per batch entry; n + 1 if none up to n."""
    n = grams.shape[-1]
    grams.diagonal(dim1=-2, dim2=-1).sub_(shift[:, None])  # grams is a fresh copy
    _, info = torch.linalg.cholesky_ex(grams)
    return torch.where(info == 0, torch.full_like(info, n + 1), info).long()


@dataclass
class _Search:
    """Per-ordering state of the shifted-Cholesky search (all tensors of length B)."""

    lo: torch.Tensor  # every prefix up to lo is proven independent
    hi: torch.Tensor  # every prefix beyond hi is proven dependent
    t: torch.Tensor  # last test point
    dep: torch.Tensor  # last test was a dependence test
    j: torch.Tensor  # last breakdown (run length + 1 when none)
    edge_tries: torch.Tensor  # tests spent on a window of width one
    j_last: torch.Tensor  # (B, 2) last two distinct breakdowns, 0 when none yet
    c_last: torch.Tensor  # (B, 2) log of their shifts

    @classmethod
    def start(cls, b: int, kmax: int, device: torch.device) -> _Search:
        zeros = torch.zeros(b, dtype=torch.long, device=device)
        return cls(
            lo=zeros.clone(),
            hi=torch.full((b,), kmax, dtype=torch.long, device=device),
            t=zeros.clone(),
            dep=torch.zeros(b, dtype=torch.bool, device=device),
            j=zeros.clone(),
            edge_tries=zeros.clone(),
            j_last=torch.zeros((b, 2), dtype=torch.long, device=device),
            c_last=torch.zeros((b, 2), dtype=torch.float64, device=device),
        )


def _search_gram(
    problem: PrefixProblem, order: torch.Tensor, hint: SearchHint | None
) -> tuple[torch.Tensor, SearchHint]:
    """Root-find the crossing of λ_min(G_k) and τ²σ_max(A_k)² with shifted Cholesky runs.

    A run with shift c first breaks down at J: λ_min(G_k) > c for k < J and ≤ c for k ≥ J.
    With [lo², hi²] a certified bracket on σ_max(A_t)² at a test point t:

    * an *independence test* (c = τ²·hi²(t)) proves every k < J with k ≤ t independent, and
      every k ≥ max(J, t + 1) dependent where τ²·lo²(k) ≥ c;
    * a *dependence test* (c = τ²·lo²(t)) proves every k ≥ max(J, t) dependent, and every
      k ≤ min(J, t) − 1 independent where τ²·hi²(k) ≤ c.

    Each round narrows the window [lo, hi] that holds m (see :func:`_plan`). What is left
    after MAX_ROUNDS, or a ratio inside the σ_max bracket, goes to an exact SVD.
    """
    b, kmax = order.shape
    grams = _PrefixGrams(problem, order)
    st = _Search.start(b, kmax, order.device)
    for round_ in range(MAX_ROUNDS):
        active = torch.nonzero((st.lo < st.hi) & (st.edge_tries < 2)).flatten()
        if active.numel() == 0:
            break
        t, dep = _plan(st, active, round_, hint, kmax)
        lo_a, hi_a = st.lo[active], st.hi[active]
        lo2, hi2 = smax2_bracket(problem, order[active], t)
        shift = problem.tau2 * torch.where(dep, lo2, hi2)
        # Run far enough to see the breakdown: to the window's top, or past t when unknown.
        reach = torch.where(hi_a < kmax, hi_a + 1, t + torch.clamp(t // 4, min=32))
        n = int(torch.clamp(reach, max=kmax).max())
        j = _first_failure(grams.leading(active, n), shift)
        failed = j <= n
        # The other end each test can prove, checked against the bracket there.
        k2 = torch.where(dep, torch.minimum(j, t) - 1, torch.maximum(j, t + 1))
        lo2_k2, hi2_k2 = smax2_bracket(problem, order[active], k2.clamp(1, kmax))
        new_lo = torch.where(dep, k2, torch.minimum(j - 1, t))
        lo_ok = ~dep | ((k2 >= 1) & (problem.tau2 * hi2_k2 <= shift))
        new_hi = torch.where(dep, torch.maximum(j, t) - 1, k2 - 1)
        hi_ok = failed & (dep | ((k2 <= kmax) & (problem.tau2 * lo2_k2 >= shift)))
        st.lo[active] = torch.where(lo_ok, torch.maximum(lo_a, new_lo), lo_a)
        st.hi[active] = torch.where(hi_ok, torch.minimum(hi_a, new_hi), hi_a)
        st.t[active], st.dep[active], st.j[active] = t, dep, j
        _remember(st, active[failed], j[failed], torch.log(shift[failed]))
    undecided = torch.nonzero(st.lo < st.hi).flatten().tolist()
    if undecided:
        _logger.debug("%d of %d orderings settled by exact SVD", len(undecided), b)
    tau = problem.tau2**0.5
    for i in undecided:
        st.lo[i] = _bisect_exact(problem.x[order[i]], int(st.lo[i]), int(st.hi[i]), tau)
    return st.lo, _next_hint(st, hint)


def _remember(st: _Search, rows: torch.Tensor, j: torch.Tensor, log_c: torch.Tensor) -> None:
    """Keep the last two breakdowns at distinct J (a repeated J replaces the latest)."""
    keep = torch.where(st.j_last[rows, 1] != j, 1, 0)
    st.j_last[rows, 0] = st.j_last[rows, keep]
    st.c_last[rows, 0] = st.c_last[rows, keep]
    st.j_last[rows, 1] = j
    st.c_last[rows, 1] = log_c


def _plan(
    st: _Search, active: torch.Tensor, round_: int, hint: SearchHint | None, kmax: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Next test point and whether it is a dependence test, for each active ordering.

    Round 0 tests the hint (a typical m) or the top. Then: a window of width one gets a
    dependence test, then an independence test; otherwise a secant estimate m̂ of the
    crossing is tested for independence, or (m̂ already proven) the first open prefix for
    dependence; without an estimate, a failed independence test is followed by a dependence
    test at its breakdown, a passed one by an independence test further up.
    """
    lo, hi = st.lo[active], st.hi[active]
    if round_ == 0:
        start = kmax if hint is None else hint.start
        t = torch.clamp(torch.full_like(lo, start), 1, kmax)
        return torch.minimum(t, hi), torch.zeros_like(lo, dtype=torch.bool)
    t_prev, j_prev = st.t[active], st.j[active]
    estimate, ok = _secant(st.j_last[active], st.c_last[active], t_prev, hint)
    broke_early = ~st.dep[active] & (j_prev <= t_prev)
    unseen = j_prev > t_prev + torch.clamp(t_prev // 4, min=32)  # no breakdown in reach
    further = torch.minimum(hi, j_prev + (j_prev - lo))
    t = torch.where(broke_early, j_prev, torch.where(unseen, further, hi))
    dep = broke_early.clone()
    t = torch.where(ok, torch.clamp(estimate, max=hi), t)
    dep = torch.where(ok, estimate <= lo, dep)
    edge = hi - lo == 1
    t = torch.where(edge | dep, lo + 1, torch.clamp(t, min=lo + 1))
    dep = torch.where(edge, st.edge_tries[active] == 0, dep)
    st.edge_tries[active] += edge.long()
    return t, dep


def _secant(
    j_last: torch.Tensor, c_last: torch.Tensor, t_last: torch.Tensor, hint: SearchHint | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Estimate of m from the breakdowns so far: where log λ_min meets log τ²σ_max².

    A breakdown at J under shift c puts log λ_min(G_k) ≈ log c at k = J − ½. Its slope comes
    from the last two breakdowns, else from the hint. Near the crossing τ²σ_max(A_k)² grows
    about like k (d log / dk ≈ 1/k), through log c at the last test point.
    """
    (j1, j2), (c1, c2) = j_last.unbind(1), c_last.unbind(1)
    k2 = j2.to(c2.dtype) - 0.5
    two = (j1 > 0) & (j2 > 0)
    slope = torch.where(two, (c2 - c1) / (j2 - j1).to(c1.dtype), float("nan"))
    if hint is not None and hint.slope is not None:
        slope = torch.where(two, slope, torch.full_like(slope, hint.slope))
    ok = (j2 > 0) & torch.isfinite(slope) & (slope < 0)
    t = t_last.to(c2.dtype).clamp(min=1.0)
    growth = 1.0 / t
    # Solve log c2 + slope·(k − k2) = log c2 + growth·(k − t) for k.
    crossing = (slope * k2 - growth * t) / (slope - growth)
    return torch.floor(torch.nan_to_num(crossing, nan=0.0)).long(), ok


def _next_hint(st: _Search, hint: SearchHint | None) -> SearchHint:
    """Median m and median breakdown slope of this batch, for the next one."""
    (j1, j2), (c1, c2) = st.j_last.unbind(1), st.c_last.unbind(1)
    two = (j1 > 0) & (j2 > 0)
    slopes = ((c2 - c1) / (j2 - j1).clamp(min=1).to(c1.dtype))[two]
    slopes = slopes[torch.isfinite(slopes) & (slopes < 0)]
    slope = float(slopes.median()) if slopes.numel() else (hint.slope if hint else None)
    return SearchHint(start=int(st.lo.median()), slope=slope)


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
