"""The Kruskal search's parts, each against direct SVDs / eigendecompositions: the prefix
factorisation, both routes, the σ_max brackets, the walk with its bounds and the worker pool."""

import numpy as np
import pytest
import torch
from scipy.linalg import lapack

from memcap.numerics.brackets import gram_bracket, projection_bracket
from memcap.numerics.kruskal import choose_route, scaled_float64
from memcap.numerics.pool import can_fork, search_batches
from memcap.numerics.prefix import PrefixProblem, bisect, prefix_is_independent, prepare
from memcap.numerics.qr import search_qr
from memcap.numerics.sampling import orderings
from memcap.numerics.search import OrderingSearch, search_gram
from memcap.numerics.tolerance import matrix_rank_rtol
from memcap.numerics.walk import Border, ritz_bounds, walk


def decaying(t: int, d: int, seed: int, mean: float = 0.0, floor: float = 1e-7) -> np.ndarray:
    """float32 rows with singular values falling to ``floor``: prefixes turn dependent at
    various lengths below d."""
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.standard_normal((d, d)))
    spectrum = np.logspace(0, np.log10(floor), d)
    offset = mean * basis[:, 0]
    return (offset + (rng.standard_normal((t, d)) * spectrum) @ basis.T).astype(np.float32)


def problem_for(x: np.ndarray, route: str = "gram") -> PrefixProblem:
    """The prefix problem :func:`memcap.numerics.kruskal_profile` builds for these queries."""
    data = torch.as_tensor(x)
    tau = matrix_rank_rtol(min(x.shape), x.shape[1], data.dtype)
    scaled = scaled_float64(data)
    _, singular, vh = torch.linalg.svd(scaled, full_matrices=False)
    return prepare(scaled, singular, vh, tau, route)


def svd_m(problem: PrefixProblem, order: np.ndarray) -> int:
    """Leading independent prefix length from a NumPy SVD of every prefix."""
    x = problem.x.numpy()
    tau = problem.tau2**0.5
    for k in range(1, len(order) + 1):
        s = np.linalg.svd(x[order[:k]], compute_uv=False)
        if not s[-1] > tau * s[0]:
            return k - 1
    return len(order)


def searcher(problem: PrefixProblem, order: np.ndarray) -> OrderingSearch:
    top = problem.y[:, 0].numpy()
    return OrderingSearch(problem, order, top[order], None)


@pytest.fixture(scope="module")
def spread():
    """A problem whose orderings turn dependent at different lengths, and 12 orderings."""
    problem = problem_for(decaying(40, 16, seed=0))
    return problem, orderings(40, 12, seed=1, size=16).numpy()


def test_reference_decision_and_bisection():
    rows = torch.tensor([[1.0, 0.0], [1.0, 1e-3]], dtype=torch.float64)
    assert prefix_is_independent(rows, 1e-4)
    assert not prefix_is_independent(rows, 1e-2)
    assert not prefix_is_independent(torch.zeros(1, 3), 1e-6)
    assert not prefix_is_independent(torch.ones(3, 2), 1e-6)  # more rows than dimensions
    assert bisect(0, 100, lambda k: k <= 37) == 37
    assert bisect(5, 5, lambda k: False) == 5


def test_factorisation_breaks_down_at_the_first_prefix_below_the_shift(spread):
    problem, orders = spread
    checked = 0
    for order in orders[:4]:
        gram = problem.x.numpy()[order] @ problem.x.numpy()[order].T
        lam_min = np.array([np.linalg.eigvalsh(gram[:k, :k])[0] for k in range(1, 17)])
        resolved = lam_min > 1e-9 * np.linalg.eigvalsh(gram)[-1]  # far above float64 rounding
        drops = (lam_min[1:] < lam_min[:-1] / 2) & resolved[1:]
        for k in np.flatnonzero(drops) + 1:  # prefix k + 1 (1-based) falls clearly below k's
            shift = float(np.sqrt(lam_min[k - 1] * lam_min[k]))
            j, _ = searcher(problem, order).factor(16, shift)
            assert j == k + 1
            checked += 1
        n = int(np.flatnonzero(resolved).max()) + 1
        j, _ = searcher(problem, order).factor(n, float(lam_min[n - 1]) / 2)
        assert j == n + 1  # no breakdown
    assert checked >= 4


def test_both_routes_agree_with_the_svd_of_every_prefix(spread):
    problem, orders = spread
    expected = [svd_m(problem, order) for order in orders]
    assert len(set(expected)) > 1 and max(expected) < 16  # the data exercise the search
    gram_m, hint = search_gram(problem, orders, None)
    assert gram_m.tolist() == expected
    assert 1 <= hint.start <= 16
    qr_m = search_qr(problem_for(decaying(40, 16, seed=0), "qr"), torch.from_numpy(orders))
    assert qr_m.tolist() == expected
    again, _ = search_gram(problem, orders, hint)  # the hint changes the work, not m
    assert again.tolist() == expected


@pytest.mark.parametrize("mean", [0.0, 20.0])
def test_sigma_max_brackets_contain_the_true_value(mean):
    problem = problem_for(decaying(50, 12, seed=2, mean=mean, floor=1e-2))
    orders = orderings(50, 6, seed=3, size=12)
    x = problem.x.numpy()
    top = problem.y[:, 0].numpy()
    widths = []
    for k in (1, 3, 7, 12):
        lo, hi = projection_bracket(problem, orders, torch.full((6,), k))
        for b, order in enumerate(orders.numpy()):
            true = np.linalg.svd(x[order[:k]], compute_uv=False)[0] ** 2
            assert lo[b] <= true <= hi[b]
            rows = x[order[:k]]
            g_lo, g_hi = gram_bracket(problem, rows @ rows.T, top[order[:k]], order[:k])
            assert g_lo <= true <= g_hi
            widths.append((g_hi - g_lo) / true)
    if mean:  # a dominant direction: Kato–Temple makes the bracket tight
        assert max(widths) < 1e-6


def constructed_gram(j: int, n: int, seed: int, dependent_rows: int = 1):
    """Gram matrix of n rows whose rows j … j + dependent_rows − 1 (1-based) are nearly
    combinations of the rows before them: λ_min(G_k) ≈ 1e-8 for k ≥ j, λ₂ stays large."""
    rng = np.random.default_rng(seed)
    rows = rng.standard_normal((n, 2 * n)) / np.sqrt(2 * n)
    for r in range(j - 1, j - 1 + dependent_rows):
        rows[r] = rng.standard_normal(j - 1) @ rows[: j - 1] + 1e-4 * rng.standard_normal(2 * n)
    return rows @ rows.T


def failed_factor(gram: np.ndarray, shift: float) -> tuple[int, np.ndarray]:
    a = gram.copy().T
    a.flat[:: gram.shape[0] + 1] -= shift
    factor, info = lapack.dpotrf(a, lower=1, clean=0, overwrite_a=1)
    return info, factor


def test_walk_bounds_bracket_the_smallest_eigenvalue():
    gram = constructed_gram(j=6, n=10, seed=4)
    shift = 1e-3
    j, factor = failed_factor(gram, shift)
    assert j == 6
    border = Border(factor, j, shift)
    for k in range(j, 11):
        eigenvalues = np.linalg.eigvalsh(gram[:k, :k])
        assert eigenvalues[0] < shift <= eigenvalues[1]
        lower, upper = border.eigenvalue_bounds(gram, k, (-np.inf, np.inf), eigenvalues[-1])
        assert lower <= eigenvalues[0] <= upper
        assert upper - lower < 1e-3 * shift  # tight enough to decide against the shift


def test_walk_gives_up_with_two_eigenvalues_below_the_shift():
    gram = constructed_gram(j=5, n=9, seed=5, dependent_rows=2)
    j, factor = failed_factor(gram, 1e-3)
    border = Border(factor, j, 1e-3)
    assert np.linalg.eigvalsh(gram[:6, :6])[1] < 1e-3
    assert border.eigenvalue_bounds(gram, 6, (-np.inf, np.inf), 10.0) is None


def test_ritz_bounds_from_a_rough_eigenvector():
    rng = np.random.default_rng(6)
    q, _ = np.linalg.qr(rng.standard_normal((8, 8)))
    eigenvalues = np.array([0.01, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0])
    g = (q * eigenvalues) @ q.T
    basis = q[:, :1] + 0.01 * rng.standard_normal((8, 2))
    lower, upper = ritz_bounds(g, basis, shift=0.9, rounding=0.0)
    assert lower <= 0.01 <= upper
    assert ritz_bounds(g, q[:, :1], shift=0.9, rounding=0.0) == pytest.approx((0.01, 0.01))


def test_walk_decisions_agree_with_svd():
    problem = problem_for(decaying(60, 24, seed=7, mean=5.0))
    narrowed = 0
    for order in orderings(60, 10, seed=8, size=24).numpy():
        m = svd_m(problem, order)
        for t in (m, m + 1):
            if not 1 <= t <= 24:
                continue
            search = searcher(problem, order)
            n = min(t + 8, 24)
            shift = problem.tau2 * search.bracket(t)[1]  # an independence test at t
            j, factor = search.factor(n, shift)
            if j > n:
                continue
            lo = min(j - 1, t)
            window = walk(
                Border(factor, j, shift), lo, 24, problem.tau2, search.bracket, search.block
            )
            assert window[0] <= m <= window[1]
            narrowed += window != (lo, 24)
    assert narrowed > 0


@pytest.mark.skipif(not can_fork(), reason="no safe fork on this platform")
def test_two_workers_give_the_batches_of_one():
    problem = problem_for(decaying(40, 16, seed=9))
    order = orderings(40, 40, seed=10, size=16)
    batches = [order[i : i + 5] for i in range(0, 40, 5)]
    one = [m.tolist() for _, m in search_batches(problem, iter(batches), workers=1)]
    two = [m.tolist() for _, m in search_batches(problem, iter(batches), workers=2)]
    assert one == two
    assert sum(one, []) == [svd_m(problem, o) for o in order.numpy()]


def test_set_up_scales_exactly_and_chooses_the_route():
    x = torch.tensor([[3.0, 4.0], [0.5, 0.0]], dtype=torch.float32)
    scaled = scaled_float64(x)
    assert scaled.dtype == torch.float64
    assert torch.equal(scaled * 8, x.double())  # a power of two: no rounding
    assert torch.equal(scaled_float64(torch.zeros(2, 2)), torch.zeros(2, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="inf or nan"):
        scaled_float64(torch.tensor([[1.0, float("nan")]]))
    float32_tau = matrix_rank_rtol(64, 64, np.float32)
    assert choose_route("auto", float32_tau, 64) == "gram"
    assert choose_route("auto", matrix_rank_rtol(64, 64, np.float64), 64) == "qr"
    assert choose_route("qr", float32_tau, 64) == "qr"
    with pytest.raises(ValueError, match="auto, gram or qr"):
        choose_route("svd", float32_tau, 64)
