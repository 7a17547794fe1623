"""The Gram route's ordering search batched over orderings on a torch device.

Every ordering of a batch keeps a window [lo, hi] holding m, as on the host
(:mod:`memcap.numerics.search`), but the heavy steps run for all open orderings at once, in
lockstep rounds on ``problem.x.device``: gather the prefix Gram blocks, bracket σ_max² of each
test prefix, and factorise every shifted block in one batched ``cholesky_ex`` whose ``info`` is
the first breakdown. Decisions need a relative margin ``decision_margin`` on both sides of the
tolerance; an ordering whose window a margin leaves open goes to a batched ``eigvalsh`` of its
test prefix, and one within the margin there to the host search, so the m are those of the
host route (docs/kruskal.md, "The device search").
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from memcap.numerics.brackets import projection_bracket
from memcap.numerics.prefix import PrefixProblem
from memcap.numerics.search import (
    EXACT_MARGIN,
    LOOKAHEAD,
    START_QUANTILE,
    OrderingSearch,
    SearchHint,
    next_test,
)
from memcap.numerics.tolerance import BRACKET_SLACK, EPS64

_logger = logging.getLogger(__name__)

# Lockstep rounds (one batched factorisation each) before open windows go to exact decisions.
MAX_ROUNDS = 16
# Power iterations of the batched σ_max² brackets (a matrix-vector product each: cheap here).
POWER_STEPS = 2
# Allowed rounding of a float64 Cholesky or eigvalsh of a k-row Gram block, in k·eps64·λ_max
# (the walk of the host route allows the same).
ROUNDING_FACTOR = 4.0


@dataclass
class Window:
    """One ordering's search state: m lies in [lo, hi]; the next test is at ``point``, of the
    ``dependence`` kind unless that one was run there.

    Attributes:
        tested: (point, is a dependence test) pairs run so far.
        step: how far past an unbroken factorisation the next test looks.
        factorisations: tests run for this ordering.
    """

    lo: int
    hi: int
    point: int
    dependence: bool = False
    tested: set[tuple[int, bool]] = field(default_factory=set)
    step: int = LOOKAHEAD
    factorisations: int = 0

    @property
    def open(self) -> bool:
        return self.lo < self.hi

    def next_test(self) -> tuple[int, bool] | None:
        """(point, is a dependence test) in the window, or None when both were run there."""
        return next_test(self.point, self.lo, self.hi, self.tested, self.dependence)

    def record(self, t: int, dep: bool, j: int, n: int) -> None:
        """Narrow the window after the test (t, dep) broke down at J (n + 1: not up to n).

        An independence test (shift above τ²·σ_max(A_t)²) proves every k < J with k ≤ t
        independent; a dependence test (shift below τ²·σ_max(A_t)²) proves every
        k ≥ max(J, t) dependent, since σ_max(A_k) ≥ σ_max(A_t) there.
        """
        self.tested.add((t, dep))
        self.factorisations += 1
        if dep:
            if j <= n:
                self.hi = min(self.hi, max(j, t) - 1)
            # t fell to the test: the window's top is next. Else t was left open: an exact
            # decision when its independence test failed too, else that test up to J − 1.
            self.dependence = False
            if j <= t:
                self.point = self.hi
            else:
                self.point = t if (t, False) in self.tested else j - 1
            return
        self.lo = max(self.lo, min(j - 1, t))
        if j > n:  # no breakdown up to n: look further, twice as far each time
            self.point, self.dependence = n + self.step, False
            self.step *= 2
        elif j > self.lo:  # the breakdown is the likely first dependent prefix
            self.point, self.dependence = j, True
        else:  # t lies far above m: bisect below it
            self.point, self.dependence = (self.lo + 1 + t) // 2, False


def decision_margin(k: torch.Tensor | int, tau2: float) -> torch.Tensor | float:
    """Relative margin δ(k) a device decision needs between λ_min(G_k) and τ²·σ_max(A_k)²:
    the host route's exact-decision margin plus the rounding of a float64 factorisation of a
    k-row Gram block relative to τ²."""
    return EXACT_MARGIN + ROUNDING_FACTOR * k * EPS64 / tau2


def search_device(
    problem: PrefixProblem, order: torch.Tensor, hint: SearchHint | None
) -> tuple[np.ndarray, SearchHint]:
    """m for each ordering (B, K) of ``order`` by the Gram route in lockstep on the device,
    and the hint for the next batch (as :func:`memcap.numerics.search.search_gram`)."""
    kmax = order.shape[1]
    start = kmax if hint is None else hint.start
    windows = [Window(0, kmax, start) for _ in range(order.shape[0])]
    device_order = order.to(problem.x.device)
    blocks = gather_gram(problem, device_order)  # (B, K, K), sliced by every round
    deferred: set[int] = set()
    for _ in range(MAX_ROUNDS):
        tests, exact = [], []
        for b, window in enumerate(windows):
            if window.open and b not in deferred:
                test = window.next_test()
                if test is None:
                    exact.append(b)
                else:
                    tests.append((b, test))
        if not tests and not exact:
            break
        deferred |= decide_exactly(blocks, problem.tau2, windows, exact)
        if tests:
            run_tests(problem, blocks, device_order, windows, tests)
    # Windows the rounds left open go to the host search too (rare: counted in the log).
    deferred |= {b for b, window in enumerate(windows) if window.open}
    m = np.array([w.lo for w in windows], dtype=np.int64)
    if deferred:
        m[sorted(deferred)] = search_on_host(problem, order[sorted(deferred)].numpy(), hint)
    _logger.debug(
        "%d orderings: %.2f factorisations each, %d deferred to the host",
        len(m), np.mean([w.factorisations for w in windows]), len(deferred),
    )  # fmt: skip
    start = int(np.quantile(m, START_QUANTILE)) + 1
    return m, SearchHint(start=min(start, kmax))


def run_tests(
    problem: PrefixProblem,
    blocks: torch.Tensor,
    order: torch.Tensor,
    windows: list[Window],
    tests: list[tuple[int, tuple[int, bool]]],
) -> None:
    """One lockstep round: the tests (ordering, (t, dep)) as one batched factorisation of the
    orderings' Gram ``blocks`` (B, K, K) for ``order`` (B, K)."""
    rows = [b for b, _ in tests]
    t = torch.tensor([test[0] for _, test in tests], device=order.device)
    dep = torch.tensor([test[1] for _, test in tests], device=order.device)
    hi = torch.tensor([windows[b].hi for b in rows], device=order.device)
    n = torch.minimum(t + LOOKAHEAD, hi + 1).clamp(max=order.shape[1])
    size = int(n.max())
    idx = order[rows, :size]  # (B', N)
    gram = blocks[torch.tensor(rows, device=blocks.device), :size, :size]  # (B', N, N), a copy
    low, high = sigma_max_brackets(problem, gram, idx, t)
    margin = decision_margin(t, problem.tau2)
    shift = problem.tau2 * torch.where(dep, low * (1 - margin), high * (1 + margin))
    j = breakdowns(gram, n, shift)
    for (b, (tb, depb)), jb, nb in zip(tests, j.tolist(), n.tolist(), strict=True):
        windows[b].record(tb, depb, jb, nb)


def gather_gram(problem: PrefixProblem, idx: torch.Tensor) -> torch.Tensor:
    """(B, N, N) Gram blocks of the rows ``idx`` (B, N): entries of the shared Gram matrix
    (those the host route uses) when it is kept, else multiplied out in float64."""
    if problem.device_gram is not None:
        return problem.device_gram[idx[:, :, None], idx[:, None, :]]
    rows = problem.x[idx]  # (B, N, d)
    return rows @ rows.transpose(1, 2)


def sigma_max_brackets(
    problem: PrefixProblem, gram: torch.Tensor, idx: torch.Tensor, t: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Certified bounds (lo, hi) on σ_max(A_t)² = λ_max(G_t) of each block's prefix t: the
    Rayleigh quotient θ after power iteration from A_t·v₁, and the Kato–Temple bound
    θ + r²/(θ − σ₂(X)²) (σ₂(X)² ≥ λ₂(G_t) by interlacing) or the projection bracket above
    (as :func:`memcap.numerics.brackets.gram_bracket`, batched)."""
    mask = torch.arange(gram.shape[1], device=gram.device)[None, :] < t[:, None]  # (B, N)
    v = problem.y[idx, 0] * mask  # (B, N): A_t·v₁, zero past t
    for _ in range(POWER_STEPS):
        v = v / torch.linalg.vector_norm(v, dim=1, keepdim=True).clamp_min(1e-300)
        v = (gram @ v[..., None])[..., 0] * mask
    v = v / torch.linalg.vector_norm(v, dim=1, keepdim=True).clamp_min(1e-300)
    gv = (gram @ v[..., None])[..., 0] * mask
    theta = (v * gv).sum(dim=1)
    residual2 = ((gv - theta[:, None] * v) ** 2).sum(dim=1)
    rounding = BRACKET_SLACK * theta
    gap = theta - problem.sigma2_2 * (1 + BRACKET_SLACK)
    low = theta - rounding
    high = theta + residual2 / gap.clamp_min(1e-300) + rounding  # Kato–Temple, where gap > 0
    no_gap = torch.nonzero(gap <= 0)[:, 0]
    if no_gap.numel():
        proj_lo, proj_hi = projection_bracket(problem, idx[no_gap], t[no_gap])
        low[no_gap] = torch.maximum(proj_lo, low[no_gap])
        high[no_gap] = proj_hi
    return low, high


def breakdowns(gram: torch.Tensor, n: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """First breakdown J ≤ n of the Cholesky factorisation of G_n − shift·I for each block
    (n + 1 if none): one batched factorisation of the whole blocks, whose first breakdown is
    that of every leading block (a breakdown past n is none up to n). Shifts ``gram`` in
    place."""
    gram.diagonal(dim1=1, dim2=2).sub_(shift[:, None])
    check_breakdown_index(gram.device)
    info = torch.linalg.cholesky_ex(gram).info
    return torch.where((info > 0) & (info <= n), info, n + 1)


# Devices whose batched ``cholesky_ex`` was seen to report the first breakdown as LAPACK does.
_checked_devices: set[str] = set()


def check_breakdown_index(device: torch.device) -> None:
    """Check once per device that ``cholesky_ex`` reports, for every matrix of a batch, the
    order of its first leading minor that is not positive definite (LAPACK's ``info``); the
    search reads its breakdowns from it. Raises RuntimeError otherwise."""
    if str(device) in _checked_devices:
        return
    for size in (5, 40, 300):  # small and large sizes take different solver paths on a GPU
        diagonal = torch.ones(4, size, dtype=torch.float64, device=device)
        expected = [size // 3 + 1, size, 1, 0]  # 0: positive definite
        for b, j in enumerate(expected[:3]):
            diagonal[b, j - 1] = -1.0
        for batch in (torch.diag_embed(diagonal), torch.diag_embed(diagonal)[:1]):
            info = torch.linalg.cholesky_ex(batch + 1e-3 * torch.ones_like(batch)).info
            if info.tolist() != expected[: batch.shape[0]]:
                raise RuntimeError(
                    f"torch.linalg.cholesky_ex on {device} reports breakdowns {info.tolist()} "
                    f"for {expected[: batch.shape[0]]}: the device search cannot read them; "
                    "set assumptions.kruskal_search: host"
                )
    _checked_devices.add(str(device))


def decide_exactly(
    blocks: torch.Tensor, tau2: float, windows: list[Window], rows: list[int]
) -> set[int]:
    """Decide each listed ordering's test point from the spectrum of its Gram block (batched
    ``eigvalsh`` of ``blocks``), and return those within the decision margin of the tolerance
    τ²: they go to the host search."""
    if not rows:
        return set()
    points = [min(max(windows[b].point, windows[b].lo + 1), windows[b].hi) for b in rows]
    t = torch.tensor(points, device=blocks.device)
    size = int(t.max())
    ratio = extreme_ratio(blocks[torch.tensor(rows, device=blocks.device), :size, :size], t)
    margin = decision_margin(t, tau2)
    above = ratio > tau2 * (1 + margin)
    below = ratio <= tau2 * (1 - margin)
    borderline = set()
    for b, tb, up, down in zip(rows, points, above.tolist(), below.tolist(), strict=True):
        window = windows[b]
        window.tested |= {(tb, False), (tb, True)}
        if up:
            window.lo, window.point, window.dependence = tb, window.hi, False
        elif down:
            window.hi, window.point, window.dependence = tb - 1, tb - 1, False
        else:
            borderline.add(b)
    return borderline


def extreme_ratio(gram: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """λ_min(G_t)/λ_max(G_t) of each block's prefix t from one batched ``eigvalsh``: the rows
    past t are replaced by the mean eigenvalue trace(G_t)/t, which lies between the two."""
    size = gram.shape[1]
    inside = torch.arange(size, device=gram.device)[None, :] < t[:, None]  # (B, N)
    a = gram * (inside[:, :, None] & inside[:, None, :])
    diagonal = a.diagonal(dim1=1, dim2=2)
    mean = diagonal.sum(dim=1) / t
    diagonal += mean[:, None] * ~inside
    values = torch.linalg.eigvalsh(a)
    top = values[:, -1]
    return torch.where(top > 0, values[:, 0] / top.clamp_min(1e-300), torch.zeros_like(top))


def search_on_host(problem: PrefixProblem, order: np.ndarray, hint: SearchHint | None) -> list[int]:
    """m of orderings whose decisions fall within the margin, by the host route's search."""
    top = problem.y[:, 0].cpu().numpy()
    with threadpool_limits(limits=1, user_api="blas"):
        return [OrderingSearch(problem, row, top[row], hint).solve() for row in order]
