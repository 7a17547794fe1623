"""The gram route of :mod:`memcap._prefix_rank`: m from a few shifted factorisations.

With G = A Aᵀ (float64) for an ordered prefix A, A_k is independent iff f(k) > g(k), where
f(k) = λ_min(G_k) falls and g(k) = τ²·σ_max(A_k)² grows with k. A Cholesky factorisation
(LAPACK ``dpotrf``) of G − cI breaks down at the first J with f(J) ≤ c, so it compares f with
c for every prefix at once. With [lo(t), hi(t)] a certified bracket on σ_max(A_t)²:

* an *independence test* at t (c = τ²·hi(t)) proves every k < J with k ≤ t independent;
* a *dependence test* at t (c = τ²·lo(t)) proves every k ≥ max(J, t) dependent;
* after either, a *walk* decides J, J + 1, … in turn (:class:`_Border`): the failed factor
  and the rows from J on give the inertia of G_k − cI; with one eigenvalue below c, the
  smallest Ritz pair of G_k on a Krylov space of inverse iteration bounds f(k) from above
  (Rayleigh) and below (Kato–Temple with λ₂(G_k) ≥ c), both recomputed from G. The walk stops
  at the first dependent prefix, or at one it cannot decide.

Each factorisation runs LOOKAHEAD rows past its test point. The first test is an independence
test at the 70th percentile of the m learnt from earlier orderings, plus one: with the walk it
settles about 80% of the orderings of embedding-like data alone (1.25 factorisations on
average; 1.6 without the walk). The walk is longest where factorisations are large (a step
costs about a WALK_ROWS-row factorisation). Later tests sit at the first open prefix, or where
the lines through the breakdowns (log f) and the brackets (log g) cross, and bisect the window
that the tests suggest when the crossing is shallow (random-init ViT queries, whose m spreads
over 180–360). σ_max(A_t)² is bracketed by a Rayleigh quotient of G_t (below) and the
Kato–Temple bound with σ₂(X)² ≥ λ₂(G_t) (above; tight to ~1e-10 when the top singular value
stands out, as for embeddings with a mean), else by the projection bracket
:func:`memcap._prefix_rank.smax2_bracket`. Orderings still open after MAX_ROUNDS, or whose
ratio sits inside the σ_max bracket, are settled by direct decisions (the spectrum of G_k, or
an SVD of the rows when that is within EXACT_MARGIN of the tolerance). The search runs on the
host (LAPACK through SciPy, one ordering at a time, one BLAS thread).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.linalg import blas, lapack

from memcap import _prefix_rank as pr

_logger = logging.getLogger(__name__)

# Tests per ordering before its remaining window goes to exact SVDs.
MAX_ROUNDS = 12
# How far past the test point a factorisation runs, to see a breakdown just above it.
LOOKAHEAD = 8
# Extra rows gathered when an ordering's prefix Gram block must grow.
REACH = 24
# Power iterations for the Rayleigh quotient of σ_max².
POWER_STEPS = 1
# Inverse iterations spanning the Krylov space of a breakdown's Ritz vector (at least, at most).
MIN_KRYLOV_STEPS = 2
KRYLOV_STEPS = 5
# Prefixes decided after one breakdown before the next factorisation: at least one, more
# where a factorisation costs more than a walk step (about WALK_ROWS rows' worth), at most 8.
MAX_WALK = 8
WALK_ROWS = 320
# Relative distance of λ_min/λ_max from τ² below which a direct decision uses an SVD.
EXACT_MARGIN = 1e-3
# Quantile of the m seen in earlier batches that sets the first test point (m + 1).
START_QUANTILE = 0.7


@dataclass(frozen=True)
class SearchHint:
    """What earlier batches learnt about where prefixes turn dependent (speed only).

    Attributes:
        start: first test point, a high quantile of the m seen, plus one.
    """

    start: int


def search(
    problem: pr.PrefixProblem, order: np.ndarray, hint: SearchHint | None
) -> tuple[np.ndarray, SearchHint]:
    """m for each ordering (B, K) of ``order``, and a hint for the next batch."""
    top = problem.y[:, 0].cpu().numpy()  # coordinates on X's top right singular vector
    found, factorisations, exact = [], 0, 0
    for row in order:  # one ordering (and its Gram block) alive at a time
        ordering = _Ordering(problem, row, top[row], hint)
        found.append(ordering.solve())
        factorisations += ordering.factorisations
        exact += ordering.exact
    _logger.debug(
        "%d orderings: %.2f factorisations each, %d settled by exact decisions",
        len(found), factorisations / len(found), exact,
    )  # fmt: skip
    start = int(np.quantile(found, START_QUANTILE)) + 1
    return np.array(found, dtype=np.int64), SearchHint(start=min(start, order.shape[1]))


class _Ordering:
    """The search for one ordering: a window [lo, hi] that holds m, narrowed by tests."""

    def __init__(
        self,
        problem: pr.PrefixProblem,
        order: np.ndarray,
        top_vector: np.ndarray,
        hint: SearchHint | None,
    ):
        """``top_vector``: A·v₁ for the ordered rows A, the start of the σ_max power iteration."""
        self.problem = problem
        self.order = order
        self.kmax = order.shape[0]
        self.tau2 = problem.tau2
        self.start = self.kmax if hint is None else hint.start
        self.gram = np.empty((0, 0))
        self._bracket: dict[int, tuple[float, float]] = {}
        self._top_vector = top_vector
        self.factorisations = 0
        self.exact = False

    def solve(self) -> int:
        """m: tests at t = the hint first, then near each breakdown, until the window closes."""
        lo, hi = 0, self.kmax
        t = self.start
        tested: set[tuple[int, bool]] = set()
        step = LOOKAHEAD
        likely = self.kmax  # tests so far suggest m ≤ likely (a guide, not a proof)
        breaks: list[tuple[int, float]] = []  # (J, log shift) of each breakdown
        for _ in range(MAX_ROUNDS):
            test = _next_test(t, lo, hi, tested)
            if test is None:
                break
            tested.add(test)
            t, dep = test
            n = min(hi + 1, t + LOOKAHEAD, self.kmax)
            self._gather(n)  # before the bracket at t ≤ n, so the block is gathered once
            low, high = self.bracket(t)
            shift = self.tau2 * (low if dep else high)
            j, factor = self._factor(n, shift)
            self.factorisations += 1
            if dep:
                if j <= t:  # f(t) ≤ f(J) ≤ τ²·lo(t)
                    hi = min(hi, t - 1)
                if self.tau2 * self.bracket(max(min(j, t) - 1, 1))[1] <= shift:
                    lo = max(lo, min(j, t) - 1)
            else:
                lo = max(lo, min(j - 1, t))
            if j <= n:
                lo, hi = self._walk(j, shift, factor, lo, hi)
            if not dep and j <= t:  # λ_min(G_t) ≤ τ²·hi(t): only the bracket keeps t open
                likely = t - 1
            likely = min(max(likely, lo), hi)
            if j > n:  # no breakdown up to n: look further, twice as far each time
                t, step = n + step, 2 * step
            else:
                if shift > 0:
                    breaks.append((j, math.log(shift)))
                # The prefix just below J (J > t), or the first prefix the walk left open
                # (J ≤ t); once two breakdowns are known, where the lines through log f and
                # log g cross.
                crossing = self._secant(breaks)
                t = crossing if crossing is not None else (j - 1 if j > t else j)
            if not lo < t <= likely:  # outside the likely window: bisect it
                t = (lo + 1 + likely) // 2
        if lo < hi:
            self.exact = True
            _logger.debug("ordering settled by exact decisions in [%d, %d]", lo, hi)
            lo = pr.bisect(lo, hi, self._independent)
        return lo

    def _independent(self, k: int) -> bool:
        """Direct decision for prefix k: the spectrum of G_k (float64 rounding ~k·eps·λ_max,
        far below τ²·λ_max), or an SVD of the rows when the ratio is that close to τ²."""
        self._gather(k)
        eigenvalues = np.linalg.eigvalsh(self.gram[:k, :k])
        ratio = eigenvalues[0] / eigenvalues[-1] if eigenvalues[-1] > 0 else 0.0
        if abs(ratio / self.tau2 - 1) > EXACT_MARGIN:
            return bool(ratio > self.tau2)
        rows = self.problem.x[torch.as_tensor(self.order[:k], device=self.problem.x.device)]
        return pr.prefix_is_independent(rows, self.tau2**0.5)

    def _secant(self, breaks: list[tuple[int, float]]) -> int | None:
        """Estimate of m from the last two breakdowns: log f through (J − ½, log shift),
        log g through the σ_max brackets at the two J, both about linear near the crossing."""
        points = sorted(dict(breaks[-2:]).items())
        if len(points) < 2:
            return None
        (j1, f1), (j2, f2) = points
        g = [self.tau2 * math.fsum(self.bracket(j)) / 2 for j in (j1, j2)]
        if min(g) <= 0:
            return None
        g1, g2 = math.log(g[0]), math.log(g[1])
        f_slope, g_slope = (f2 - f1) / (j2 - j1), (g2 - g1) / (j2 - j1)
        if not f_slope < g_slope:
            return None
        return math.floor(j2 - 0.5 + (g2 - f2 - 0.5 * g_slope) / (f_slope - g_slope))

    def bracket(self, k: int) -> tuple[float, float]:
        """Certified bounds (lo, hi) on σ_max(A_k)²."""
        if k not in self._bracket:
            self._bracket[k] = self._smax2(k)
        return self._bracket[k]

    def _smax2(self, k: int) -> tuple[float, float]:
        """Rayleigh quotient θ of G_k after power iteration from A_k·v₁; Kato–Temple above."""
        problem = self.problem
        self._gather(k)
        g = self.gram[:k, :k]
        v = self._top_vector[:k] / max(float(np.linalg.norm(self._top_vector[:k])), 1e-300)
        for _ in range(POWER_STEPS):
            v = g @ v
            v /= max(float(np.linalg.norm(v)), 1e-300)  # G_k·v = 0 only for zero rows
        gv = g @ v
        theta = float(v @ gv)
        residual2 = float(np.sum((gv - theta * v) ** 2))
        rounding = pr.BRACKET_SLACK * theta
        gap = theta - problem.sigma2_2 * (1 + pr.BRACKET_SLACK)
        if gap > 0:  # Kato–Temple: no other eigenvalue of G_k lies above σ₂(X)²
            return theta - rounding, theta + residual2 / gap + rounding
        rows = torch.as_tensor(self.order[None, :k], device=problem.x.device)
        k_ = torch.tensor([k], device=problem.x.device)
        lo, hi = (float(v[0]) for v in pr.smax2_bracket(problem, rows, k_))
        return max(lo, theta - rounding), hi

    def _gather(self, size: int) -> None:
        """Make the prefix Gram block hold at least ``size`` rows."""
        if size <= self.gram.shape[0]:
            return
        size = min(max(size, self.gram.shape[0] + REACH), self.kmax)
        idx = self.order[:size]
        if self.problem.gram is not None:
            self.gram = self.problem.gram.take(idx, axis=0).take(idx, axis=1)
        else:
            rows = self.problem.x[torch.as_tensor(idx, device=self.problem.x.device)]
            rows = rows.cpu().numpy()
            self.gram = rows @ rows.T

    def _factor(self, n: int, shift: float) -> tuple[int, np.ndarray]:
        """First breakdown J of the Cholesky factorisation of G_n − shift·I (n + 1 if none),
        and the factor (lower triangle; its leading J − 1 block is valid)."""
        self._gather(n)
        a = self.gram[:n, :n].copy().T  # F-ordered: the block is symmetric
        a.flat[:: n + 1] -= shift
        factor, info = lapack.dpotrf(a, lower=1, clean=0, overwrite_a=1)
        if info < 0:
            raise RuntimeError(f"dpotrf rejected argument {-info}")
        return (info if info > 0 else n + 1), factor

    def _walk(self, j: int, shift: float, factor: np.ndarray, lo: int, hi: int) -> tuple[int, int]:
        """(lo, hi) after deciding prefixes J, J + 1, … in turn, following a factorisation with
        this shift that broke down at J (so f(k) ≤ shift for every k ≥ J).

        Prefix k is dependent when shift ≤ τ²·lo(k), or when the Ritz value of G_k on the
        Krylov space of :class:`_Border` is that low; independent when the Kato–Temple bound
        of that Ritz pair is above τ²·hi(k). The walk stops at the first prefix neither proves.
        """
        border = _Border(factor, j, shift)
        steps = min(MAX_WALK, max(1, int((factor.shape[0] / WALK_ROWS) ** 3)))
        for k in range(max(j, lo + 1), min(hi, j + steps - 1) + 1):
            low, high = self.bracket(k)
            if shift <= self.tau2 * low:
                return lo, k - 1
            self._gather(k)
            dependent, independent = self.tau2 * low, self.tau2 * high
            bounds = border.eigenvalue_bounds(self.gram, k, (dependent, independent), high)
            if bounds is None:
                break
            below, above = bounds
            if above <= dependent:
                return lo, k - 1
            if below <= independent:
                break
            lo = k
        return lo, hi


class _Border:
    """G_k − shift·I for the prefixes k ≥ J after a factorisation broke down at J: the failed
    factor's valid block L (J − 1 rows) and a border of the rows J … k give the block LDLᵀ
    [[L, 0], [Wᵀ, I]]·diag(I, S)·[[Lᵀ, W], [0, I]] with W = L⁻¹B and S = C − shift·I − WᵀW.

    S has as many negative eigenvalues as G_k has below the shift (Sylvester). With exactly
    one, λ₂(G_k) ≥ shift, and a vector with Rayleigh quotient ρ < shift and residual r bounds
    λ_min(G_k) ≥ ρ − r²/(shift − ρ) (Kato–Temple). The vector is the Ritz vector of G_k on the
    Krylov space of inverse iteration on G_k − shift·I from the newest coordinate; ρ and r
    are recomputed from G, so the bounds do not rely on the factorisation's accuracy beyond
    the inertia (rounding of the order k·eps·λ_max(G_k) is allowed for both).
    """

    def __init__(self, factor: np.ndarray, j: int, shift: float):
        """``factor``: the F-ordered n × n output of the failed factorisation; its rows from J
        on are overwritten with those of the identity so the whole array is a triangular
        factor whose solves leave those coordinates alone."""
        size = factor.shape[0]
        factor[j - 1 :, :] = 0.0
        factor.flat[(j - 1) * (size + 1) :: size + 1] = 1.0
        self.factor = factor
        self.j = j
        self.shift = shift
        self.w = np.empty((j - 1, 0))

    def _lower_solve(self, rhs: np.ndarray, trans: int) -> np.ndarray:
        """L⁻¹·rhs (trans 0) or L⁻ᵀ·rhs (trans 1) for a vector of length J − 1."""
        if self.j == 1:
            return rhs
        padded = np.zeros(self.factor.shape[0])
        padded[: self.j - 1] = rhs
        return blas.dtrsv(self.factor, padded, lower=1, trans=trans)[: self.j - 1]

    def eigenvalue_bounds(
        self, gram: np.ndarray, k: int, levels: tuple[float, float], smax2_hi: float
    ) -> tuple[float, float] | None:
        """Certified (lower, upper) bounds on λ_min(G_k), or None when G_k may have more than
        one eigenvalue below the shift. The Krylov space grows until the bounds put λ_min on
        one side of ``levels`` (dependence, independence) or reach KRYLOV_STEPS vectors.
        ``smax2_hi`` bounds λ_max(G_k) (for rounding)."""
        j = self.j
        while self.w.shape[1] < k - j + 1:
            column = self._lower_solve(gram[: j - 1, j - 1 + self.w.shape[1]], 0)
            self.w = np.column_stack([self.w, column])
        w = self.w
        s = gram[j - 1 : k, j - 1 : k] - w.T @ w
        s.flat[:: k - j + 2] -= self.shift
        values, vectors = np.linalg.eigh(s)
        rounding = 4 * k * np.finfo(np.float64).eps * smax2_hi
        if values[0] >= 0 or (values.size > 1 and values[1] <= rounding):
            return None
        g = gram[:k, :k]
        v = np.zeros(k)
        v[-1] = 1.0
        basis: list[np.ndarray] = []
        bounds = None
        for _ in range(min(KRYLOV_STEPS, k)):
            y = self._lower_solve(v[: j - 1], 0)
            z = vectors @ ((vectors.T @ (v[j - 1 :] - w.T @ y)) / values)
            v = np.concatenate([self._lower_solve(y - w @ z, 1), z])
            norm = float(np.linalg.norm(v))
            if not 0 < norm < math.inf:
                break
            v /= norm
            basis.append(v)
            if len(basis) < min(MIN_KRYLOV_STEPS, k):
                continue
            bounds = self._ritz_bounds(g, np.stack(basis, axis=1), rounding)
            if bounds is None or bounds[1] <= levels[0] or bounds[0] > levels[1]:
                break
        return bounds

    def _ritz_bounds(
        self, g: np.ndarray, basis: np.ndarray, rounding: float
    ) -> tuple[float, float] | None:
        """(Kato–Temple lower, Rayleigh upper) bounds on λ_min(G_k) from the smallest Ritz
        pair of G_k on span(basis), or None if rounding left them undefined."""
        q, r = np.linalg.qr(basis)
        diagonal = np.abs(np.diag(r))
        q = q[:, diagonal > 1e-10 * diagonal.max()]  # drop directions the Krylov space repeats
        gq = g @ q
        _, ritz = np.linalg.eigh(q.T @ gq)
        v, gv = q @ ritz[:, 0], gq @ ritz[:, 0]
        norm2 = float(v @ v)
        rho = float(v @ gv) / norm2
        residual2 = float(np.sum((gv - rho * v) ** 2)) / norm2
        upper = rho + rounding
        gap = self.shift - rounding - upper
        lower = rho - rounding - residual2 / gap if gap > 0 else -math.inf
        if math.isnan(lower) or not math.isfinite(upper):
            return None
        return lower, upper


def _next_test(t: int, lo: int, hi: int, tested: set[tuple[int, bool]]) -> tuple[int, bool] | None:
    """The test to run near the suggested point t, as (point, is a dependence test), or None
    when the window (lo, hi] is closed or both tests were run at the point.

    Points are kept in the window; a point already tested for independence gets a dependence
    test.
    """
    if lo >= hi:
        return None
    t = min(max(t, lo + 1), hi)
    for dep in (False, True):
        if (t, dep) not in tested:
            return t, dep
    return None
