"""The gram route of :mod:`memcap._prefix_rank`: m from a few shifted Cholesky factorisations.

With G = A Aᵀ (float64) for an ordered prefix A, A_k is independent iff f(k) > g(k), where
f(k) = λ_min(G_k) falls and g(k) = τ²·σ_max(A_k)² grows with k. One Cholesky factorisation
of G − cI breaks down at the first J with f(J) ≤ c, so it compares f with c for every prefix
at once. With [lo²(t), hi²(t)] a certified bracket on σ_max(A_t)²:

* an *independence test* at t (c = τ²·hi²(t)) proves every k < J with k ≤ t independent, and
  every k ≥ max(J, t + 1) dependent where τ²·lo²(k) ≥ c;
* a *dependence test* at t (c = τ²·lo²(t)) proves every k ≥ max(J, t) dependent, and every
  k ≤ min(J, t) − 1 independent where τ²·hi²(k) ≤ c.

Each round narrows a window [lo, hi] that holds m. Test points come from a secant estimate of
the crossing: each breakdown is a point of log f, each bracket a point of log g, both about
linear in k near the crossing. Orderings still open after MAX_ROUNDS, or whose ratio sits
inside the σ_max bracket, are settled by exact SVDs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from memcap import _prefix_rank as pr

_logger = logging.getLogger(__name__)

# Shifted-Cholesky rounds before the remaining open orderings go to exact SVDs.
MAX_ROUNDS = 16
# Orderings per factorisation batch at least; a round splits its orderings into up to four
# batches of similar length, so short runs do not pay for long ones.
GROUP = 16
# How far past the largest m seen so far (or the test point) a run looks for its breakdown.
REACH = 24


@dataclass(frozen=True)
class SearchHint:
    """What earlier batches learnt about where prefixes turn dependent (speed only).

    Attributes:
        start: a typical m, the first test point.
        top: the largest m seen.
        slope: a typical d log f / dk near the crossing (negative), or None.
    """

    start: int
    top: int
    slope: float | None = None


@dataclass
class _State:
    """Per-ordering search state; every tensor has the batch as its first dimension."""

    lo: torch.Tensor  # prefixes up to lo are proven independent
    hi: torch.Tensor  # prefixes beyond hi are proven dependent
    t: torch.Tensor  # last test point
    dep: torch.Tensor  # last test was a dependence test
    j: torch.Tensor  # last breakdown (run length + 1 when none)
    edge: torch.Tensor  # tests spent on the current window of width one
    stalled: torch.Tensor  # the last test did not narrow the window
    f_k: torch.Tensor  # (B, 2) last two distinct breakdowns J (0: none), at k = J − ½
    f_v: torch.Tensor  # (B, 2) log of their shifts
    g_k: torch.Tensor  # (B, 2) last two distinct bracket points k (0: none)
    g_v: torch.Tensor  # (B, 2) log τ²σ_max² there (bracket midpoint)

    @classmethod
    def start(cls, b: int, kmax: int, device: torch.device) -> _State:
        def longs(*shape: int) -> torch.Tensor:
            return torch.zeros(shape, dtype=torch.long, device=device)

        def floats(*shape: int) -> torch.Tensor:
            return torch.zeros(shape, dtype=torch.float64, device=device)

        return cls(
            lo=longs(b),
            hi=torch.full((b,), kmax, dtype=torch.long, device=device),
            t=longs(b),
            dep=torch.zeros(b, dtype=torch.bool, device=device),
            j=longs(b),
            edge=longs(b),
            stalled=torch.zeros(b, dtype=torch.bool, device=device),
            f_k=longs(b, 2),
            f_v=floats(b, 2),
            g_k=longs(b, 2),
            g_v=floats(b, 2),
        )


class _PrefixGrams:
    """Gram matrices of each ordered prefix, gathered once (grown only when needed), and
    reusable buffers for the factorisations: fresh large tensors cost page faults every run."""

    def __init__(self, problem: pr.PrefixProblem, order: torch.Tensor, size: int) -> None:
        self.problem = problem
        self.order = order
        self.size = min(size, order.shape[1])
        self.blocks = _gram_blocks(problem, order[:, : self.size])  # (B, size, size)
        self.grown: dict[int, torch.Tensor] = {}  # orderings that needed more than size
        self.work = torch.empty(0, dtype=torch.float64, device=order.device)
        self.factor = torch.empty(0, dtype=torch.float64, device=order.device)

    def shifted(self, rows: list[int], n: int, shift: torch.Tensor) -> torch.Tensor:
        """(len(rows), n, n) leading blocks of orderings ``rows`` minus shift·I (a buffer)."""
        out = _buffer(self, "work", len(rows) * n * n).view(len(rows), n, n)
        for i, b in enumerate(rows):
            if n <= self.size:
                out[i] = self.blocks[b, :n, :n]
                continue
            block = self.grown.get(b)
            if block is None or block.shape[0] < n:
                size = min(self.order.shape[1], max(n, self.size * 3 // 2))
                block = self.grown[b] = _gram_blocks(self.problem, self.order[b : b + 1, :size])[0]
            out[i] = block[:n, :n]
        out.diagonal(dim1=-2, dim2=-1).sub_(shift[:, None])
        return out


def _buffer(owner: _PrefixGrams, name: str, numel: int) -> torch.Tensor:
    """The first ``numel`` entries of a reusable flat buffer, grown when too small."""
    current = getattr(owner, name)
    if current.numel() < numel:
        current = torch.empty(numel, dtype=torch.float64, device=current.device)
        setattr(owner, name, current)
    return current[:numel]


def _gram_blocks(problem: pr.PrefixProblem, order: torch.Tensor) -> torch.Tensor:
    """(B, K, K) Gram matrices of the ordered prefixes."""
    b, k = order.shape
    if problem.gram is None:
        rows = problem.x[order]  # (B, K, d)
        return rows @ rows.transpose(1, 2)
    out = problem.gram.new_empty((b, k, k))
    rows = problem.gram.new_empty((k, problem.gram.shape[0]))
    for i, idx in enumerate(order):
        torch.index_select(problem.gram, 0, idx, out=rows)
        torch.index_select(rows, 1, idx, out=out[i])
    return out


def _runs(
    grams: _PrefixGrams, active: torch.Tensor, reach: torch.Tensor, shift: torch.Tensor
) -> torch.Tensor:
    """First breakdowns of shifted factorisations; orderings grouped by how far they must run.

    Returns J per active ordering, or (its reach + 1) when none within its reach.
    """
    j = torch.empty_like(reach)
    ranked = torch.argsort(reach)
    groups = torch.tensor_split(ranked, max(1, min(4, ranked.numel() // GROUP)))
    for group in groups:
        n = int(reach[group].max())
        shifted = grams.shifted(active[group].tolist(), n, shift[group])
        factor = _buffer(grams, "factor", shifted.numel()).view(shifted.shape).transpose(1, 2)
        found = first_breakdown(shifted, factor)
        j[group] = torch.where(found > reach[group], reach[group] + 1, found)
    return j


def first_breakdown(shifted: torch.Tensor, factor: torch.Tensor | None = None) -> torch.Tensor:
    """First k (1-based) where the shifted Gram matrices G_k − cI stop being positive definite
    (λ_min(G_k) ≤ c), per batch entry; n + 1 if they never do up to n.

    ``factor`` is an optional (B, n, n) column-major buffer for the Cholesky factor.
    """
    n = shifted.shape[-1]
    if factor is None:
        _, info = torch.linalg.cholesky_ex(shifted)
    else:
        info = torch.empty(shifted.shape[0], dtype=torch.int32, device=shifted.device)
        torch.linalg.cholesky_ex(shifted, out=(factor, info))
    return torch.where(info == 0, torch.full_like(info, n + 1), info).long()


def search(
    problem: pr.PrefixProblem, order: torch.Tensor, hint: SearchHint | None
) -> tuple[torch.Tensor, SearchHint]:
    """m for each ordering (B, K) of ``order``, and a hint for the next batch."""
    b, kmax = order.shape
    # Gather as far as this batch will likely run: past the largest m seen so far.
    grams = _PrefixGrams(problem, order, kmax if hint is None else hint.top + REACH)
    st = _State.start(b, kmax, order.device)
    tau2 = problem.tau2
    for round_ in range(MAX_ROUNDS):
        active = torch.nonzero((st.lo < st.hi) & (st.edge < 2)).flatten()
        if active.numel() == 0:
            break
        t, dep = _plan(st, active, round_, hint, kmax)
        lo_a, hi_a, rows = st.lo[active], st.hi[active], order[active]
        lo2, hi2 = pr.smax2_bracket(problem, rows, t)
        shift = tau2 * torch.where(dep, lo2, hi2)
        # Run far enough to see the breakdown: to the window's top, or well past t.
        beyond = torch.maximum(t, torch.full_like(t, hint.top if hint else kmax)) + REACH
        reach = torch.where(hi_a < kmax, hi_a + 1, beyond)
        reach = torch.clamp(reach, max=kmax)
        j = _runs(grams, active, reach, shift)
        failed = j <= reach
        # The other end each test can prove, checked against the bracket there.
        k2 = torch.where(dep, torch.minimum(j, t) - 1, torch.maximum(j, t + 1))
        lo2_k2, hi2_k2 = pr.smax2_bracket(problem, rows, k2.clamp(1, kmax))
        new_lo = torch.where(dep, k2, torch.minimum(j - 1, t))
        lo_ok = ~dep | ((k2 >= 1) & (tau2 * hi2_k2 <= shift))
        new_hi = torch.where(dep, torch.maximum(j, t) - 1, k2 - 1)
        hi_ok = failed & (dep | ((k2 <= kmax) & (tau2 * lo2_k2 >= shift)))
        st.lo[active] = torch.where(lo_ok, torch.maximum(lo_a, new_lo), lo_a)
        st.hi[active] = torch.where(hi_ok, torch.minimum(hi_a, new_hi), hi_a)
        st.stalled[active] = (st.lo[active] == lo_a) & (st.hi[active] == hi_a)
        st.t[active], st.dep[active], st.j[active] = t, dep, j
        _push(st.f_k, st.f_v, active[failed], j[failed], torch.log(shift[failed]))
        _push(st.g_k, st.g_v, active, t, torch.log(tau2 * (lo2 * hi2).sqrt()))
        inside = (k2 >= 1) & (k2 <= kmax)
        log_g2 = torch.log(tau2 * (lo2_k2 * hi2_k2).sqrt())
        _push(st.g_k, st.g_v, active[inside], k2[inside], log_g2[inside])
    undecided = torch.nonzero(st.lo < st.hi).flatten().tolist()
    if undecided:
        _logger.debug("%d of %d orderings settled by exact SVD", len(undecided), b)
    tau = tau2**0.5
    for i in undecided:
        st.lo[i] = pr.bisect_exact(problem.x[order[i]], int(st.lo[i]), int(st.hi[i]), tau)
    return st.lo, _next_hint(st, hint)


def _push(ks: torch.Tensor, vs: torch.Tensor, rows: torch.Tensor, k: torch.Tensor, v) -> None:
    """Record (k, v) as the latest point; a repeated k replaces the latest point."""
    keep = torch.where(ks[rows, 1] != k, 1, 0)
    ks[rows, 0] = ks[rows, keep]
    vs[rows, 0] = vs[rows, keep]
    ks[rows, 1] = k
    vs[rows, 1] = v


def _plan(
    st: _State, active: torch.Tensor, round_: int, hint: SearchHint | None, kmax: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Next test point and whether it is a dependence test, for each active ordering.

    Round 0 tests the hint (a typical m) or the top. Then the secant estimate m̂: an
    independence test at m̂, or a dependence test at lo + 1 when m̂ ≤ lo. Without an
    estimate: a dependence test at the breakdown of a failed independence test, else an
    independence test further up. A test that narrowed nothing is followed by the other kind
    (bisecting); a window of width one gets both tests, the likelier first.
    """
    lo, hi = st.lo[active], st.hi[active]
    if round_ == 0:
        start = kmax if hint is None else hint.start
        t = torch.clamp(torch.full_like(lo, start), 1, kmax)
        return torch.minimum(t, hi), torch.zeros_like(lo, dtype=torch.bool)
    t_prev, j_prev = st.t[active], st.j[active]
    broke_early = ~st.dep[active] & (j_prev <= t_prev)
    further = torch.minimum(hi, j_prev + (j_prev - lo))
    t = torch.where(broke_early, lo + 1, further)
    dep = broke_early.clone()
    estimate, ok = _secant(st, active, hint)
    t = torch.where(ok, torch.clamp(estimate, lo + 1, hi), t)
    dep = torch.where(ok, estimate <= lo, dep)
    # A failed independence test breaks at lo + 1: test that prefix for dependence first.
    sharp = broke_early & (j_prev == lo + 1)
    t = torch.where(sharp, lo + 1, t)
    dep = dep | sharp
    # After an independence test that narrowed nothing (it broke at or below lo + 1, the σ_max
    # bracket too loose to prove that breakdown dependent), a dependence test at lo + 1; after
    # a dependence test that narrowed nothing, bisection by an independence test below hi.
    stalled = st.stalled[active]
    after_dep = stalled & st.dep[active]
    t = torch.where(after_dep, torch.clamp((lo + hi + 1) // 2, max=hi - 1), t)
    t = torch.where(stalled & ~after_dep, lo + 1, t)
    dep = torch.where(stalled, ~after_dep, dep)
    edge = hi - lo == 1
    first = st.edge[active] == 0
    dep_first = torch.where(ok, estimate <= lo, broke_early)
    dep = torch.where(edge, torch.where(first, dep_first, ~st.dep[active]), dep)
    t = torch.where(edge, lo + 1, torch.clamp(t, lo + 1, hi))
    st.edge[active] = torch.where(edge, st.edge[active] + 1, torch.zeros_like(lo))
    return t, dep


def _secant(
    st: _State, active: torch.Tensor, hint: SearchHint | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Estimate of m: where the lines through the points of log f and log g cross.

    A breakdown at J under shift c puts log f ≈ log c at k = J − ½. Without two such points
    the hint's slope is used; without two bracket points, log g grows like log k.
    """
    fk, fv = st.f_k[active].to(torch.float64) - 0.5, st.f_v[active]
    gk, gv = st.g_k[active].to(torch.float64), st.g_v[active]
    two_f = st.f_k[active, 0] > 0
    f_slope = (fv[:, 1] - fv[:, 0]) / (fk[:, 1] - fk[:, 0])
    fallback = float("nan") if hint is None or hint.slope is None else hint.slope
    f_slope = torch.where(two_f, f_slope, torch.full_like(f_slope, fallback))
    two_g = (st.g_k[active, 0] > 0) & (st.g_k[active, 1] > 0)
    g_slope = torch.where(two_g, (gv[:, 1] - gv[:, 0]) / (gk[:, 1] - gk[:, 0]), 1 / gk[:, 1])
    g_slope = torch.nan_to_num(g_slope, nan=0.0, posinf=0.0, neginf=0.0).clamp(min=0)
    ok = (st.f_k[active, 1] > 0) & (st.g_k[active, 1] > 0) & (f_slope < 0)
    # log f: fv1 + f_slope (k − fk1);  log g: gv1 + g_slope (k − gk1).
    crossing = (gv[:, 1] - fv[:, 1] + f_slope * fk[:, 1] - g_slope * gk[:, 1]) / (f_slope - g_slope)
    ok &= torch.isfinite(crossing)
    estimate = torch.floor(torch.nan_to_num(crossing, nan=0.0, posinf=0.0, neginf=0.0))
    return estimate.clamp(-1, 2**31).long(), ok


def _next_hint(st: _State, hint: SearchHint | None) -> SearchHint:
    """Median m and median breakdown slope of this batch, for the next one."""
    two = st.f_k[:, 0] > 0
    slopes = (st.f_v[:, 1] - st.f_v[:, 0]) / (st.f_k[:, 1] - st.f_k[:, 0]).to(torch.float64)
    slopes = slopes[two & torch.isfinite(slopes) & (slopes < 0)]
    slope = float(slopes.median()) if slopes.numel() else (hint.slope if hint else None)
    top = max(int(st.lo.max()), hint.top if hint else 0)
    return SearchHint(start=int(st.lo.median()), top=top, slope=slope)
