"""The search for m, the leading independent prefix length, of each ordering of a batch.

The QR route is :mod:`memcap.numerics.qr`. The Gram route (this module) narrows a window
[lo, hi] holding m with tests: shifted Cholesky factorisations of the prefix Gram matrix, each
followed by the walk of :mod:`memcap.numerics.walk`, with shifts from the σ_max brackets of
:mod:`memcap.numerics.brackets`. The full derivation and the test schedule are in
:mod:`memcap.numerics.kruskal` and docs/kruskal.md.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.linalg import lapack
from threadpoolctl import threadpool_limits

from memcap.numerics.brackets import gram_bracket
from memcap.numerics.prefix import PrefixProblem, bisect, prefix_is_independent
from memcap.numerics.qr import search_qr
from memcap.numerics.walk import Border, walk

_logger = logging.getLogger(__name__)

# Tests per ordering before its remaining window goes to exact decisions.
MAX_ROUNDS = 12
# How far past the test point a factorisation runs, to see a breakdown just above it.
LOOKAHEAD = 8
# Extra rows gathered when an ordering's prefix Gram block must grow.
REACH = 24
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


def search_batch(
    problem: PrefixProblem, order: torch.Tensor, hint: SearchHint | None
) -> tuple[np.ndarray, SearchHint | None]:
    """m for each ordering (B, K) of a batch by the problem's route, and the Gram route's
    hint for the next batch."""
    if problem.route != "gram":
        return search_qr(problem, order.to(problem.x.device)).cpu().numpy(), hint
    # One BLAS thread: the factorisations are small, and threads only contend for them.
    with threadpool_limits(limits=1, user_api="blas"):
        return search_gram(problem, order.numpy(), hint)


def search_gram(
    problem: PrefixProblem, order: np.ndarray, hint: SearchHint | None
) -> tuple[np.ndarray, SearchHint]:
    """m for each ordering (B, K) of ``order`` by the Gram route, and a hint for the next batch."""
    top = problem.y[:, 0].cpu().numpy()  # coordinates on X's top right singular vector
    found, factorisations, exact = [], 0, 0
    for row in order:  # one ordering (and its Gram block) alive at a time
        ordering = OrderingSearch(problem, row, top[row], hint)
        found.append(ordering.solve())
        factorisations += ordering.factorisations
        exact += ordering.exact
    _logger.debug(
        "%d orderings: %.2f factorisations each, %d settled by exact decisions",
        len(found), factorisations / len(found), exact,
    )  # fmt: skip
    start = int(np.quantile(found, START_QUANTILE)) + 1
    return np.array(found, dtype=np.int64), SearchHint(start=min(start, order.shape[1]))


class OrderingSearch:
    """The search for one ordering: a window [lo, hi] that holds m, narrowed by tests.

    Attributes:
        factorisations: shifted Cholesky factorisations run so far.
        exact: whether the window was closed by direct decisions.
    """

    def __init__(
        self,
        problem: PrefixProblem,
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
            test = next_test(t, lo, hi, tested)
            if test is None:
                break
            tested.add(test)
            t, dep = test
            n = min(hi + 1, t + LOOKAHEAD, self.kmax)
            self._gather(n)  # before the bracket at t ≤ n, so the block is gathered once
            low, high = self.bracket(t)
            shift = self.tau2 * (low if dep else high)
            j, factor = self.factor(n, shift)
            self.factorisations += 1
            if dep:
                if j <= t:  # f(t) ≤ f(J) ≤ τ²·lo(t)
                    hi = min(hi, t - 1)
                if self.tau2 * self.bracket(max(min(j, t) - 1, 1))[1] <= shift:
                    lo = max(lo, min(j, t) - 1)
            else:
                lo = max(lo, min(j - 1, t))
            if j <= n:
                border = Border(factor, j, shift)
                lo, hi = walk(border, lo, hi, self.tau2, self.bracket, self.block)
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
            lo = bisect(lo, hi, self.independent)
        return lo

    def independent(self, k: int) -> bool:
        """Direct decision for prefix k: the spectrum of G_k (float64 rounding ~k·eps·λ_max,
        far below τ²·λ_max), or an SVD of the rows when the ratio is that close to τ²."""
        eigenvalues = np.linalg.eigvalsh(self.block(k)[:k, :k])
        ratio = eigenvalues[0] / eigenvalues[-1] if eigenvalues[-1] > 0 else 0.0
        if abs(ratio / self.tau2 - 1) > EXACT_MARGIN:
            return bool(ratio > self.tau2)
        rows = self.problem.x[torch.as_tensor(self.order[:k], device=self.problem.x.device)]
        return prefix_is_independent(rows, self.tau2**0.5)

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
        """Certified bounds (lo, hi) on σ_max(A_k)² (cached)."""
        if k not in self._bracket:
            g = self.block(k)[:k, :k]
            self._bracket[k] = gram_bracket(self.problem, g, self._top_vector[:k], self.order[:k])
        return self._bracket[k]

    def block(self, size: int) -> np.ndarray:
        """The ordering's prefix Gram block, grown to hold at least ``size`` rows."""
        self._gather(size)
        return self.gram

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

    def factor(self, n: int, shift: float) -> tuple[int, np.ndarray]:
        """First breakdown J of the Cholesky factorisation of G_n − shift·I (n + 1 if none),
        and the factor (lower triangle; its leading J − 1 block is valid)."""
        a = self.block(n)[:n, :n].copy().T  # F-ordered: the block is symmetric
        a.flat[:: n + 1] -= shift
        factor, info = lapack.dpotrf(a, lower=1, clean=0, overwrite_a=1)
        if info < 0:
            raise RuntimeError(f"dpotrf rejected argument {-info}")
        return (info if info > 0 else n + 1), factor


def next_test(
    t: int, lo: int, hi: int, tested: set[tuple[int, bool]], dependence_first: bool = False
) -> tuple[int, bool] | None:
    """The test to run near the suggested point t, as (point, is a dependence test), or None
    when the window (lo, hi] is closed or both tests were run at the point.

    Points are kept in the window; a point already tested for independence gets a dependence
    test (``dependence_first``: the other way round).
    """
    if lo >= hi:
        return None
    t = min(max(t, lo + 1), hi)
    for dep in (dependence_first, not dependence_first):
        if (t, dep) not in tested:
            return t, dep
    return None
