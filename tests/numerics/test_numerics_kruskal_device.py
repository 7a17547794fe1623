"""The Kruskal search batched on a torch device (run here on the CPU, through the code path a
GPU runs): the same m, profile, estimate and certificates as the host search, its parts
against eigendecompositions, borderline orderings deferred to the host."""

import numpy as np
import pytest
import torch
from snakemake.utils import validate

from memcap.assumptions.settings import AssumptionsSettings
from memcap.numerics import batched_search, kruskal_profile, scaled_for_rank
from memcap.numerics.batched_search import (
    Window,
    breakdowns,
    check_breakdown_index,
    extreme_ratio,
    gather_gram,
    search_device,
    sigma_max_brackets,
)
from memcap.numerics.kruskal import choose_search, scaled_float64
from memcap.numerics.prefix import prepare
from memcap.numerics.sampling import orderings
from memcap.numerics.tolerance import matrix_rank_rtol


def reference_m(x: np.ndarray, order: np.ndarray, rtol: float) -> int:
    """Leading independent prefix length from a float64 SVD of every prefix."""
    for k in range(1, len(order) + 1):
        s = np.linalg.svd(x[order[:k]], compute_uv=False)
        if not s[-1] > rtol * s[0]:
            return k - 1
    return len(order)


def embedding_like(t: int, d: int, seed: int) -> np.ndarray:
    """float32 queries with a mean and a falling spectrum: orderings turn dependent below d."""
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.standard_normal((d, d)))
    spectrum = np.logspace(0, -6.5, d)
    return (3.0 * basis[:, 0] + (rng.standard_normal((t, d)) * spectrum) @ basis.T).astype(
        np.float32
    )


def rank_deficient(t: int, d: int, k: int, seed: int) -> np.ndarray:
    """float32 queries in a random k-dimensional subspace (Kruskal rank k)."""
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.standard_normal((d, k)))
    return (rng.standard_normal((t, k)) @ basis.T).astype(np.float32)


def duplicated(t: int, d: int, seed: int) -> np.ndarray:
    """Gaussian float32 queries, a quarter of them copies of others, one zero row."""
    x = np.random.default_rng(seed).standard_normal((t, d)).astype(np.float32)
    x[t // 2 : t // 2 + t // 4] = x[: t // 4]
    x[-1] = 0.0
    return x


CASES = {
    "embedding": lambda: embedding_like(120, 40, seed=0),
    "isotropic": lambda: np.random.default_rng(1).standard_normal((90, 32)).astype(np.float32),
    "rank_deficient": lambda: rank_deficient(80, 36, 23, seed=2),
    "duplicated": lambda: duplicated(64, 24, seed=3),
    "tall_d": lambda: embedding_like(30, 64, seed=4),  # T < d: kmax = T
}


def decided_on(x: np.ndarray, scaling: str) -> np.ndarray:
    """The values a profile with ``scaling`` decides on, scaled to float64 as it scales them."""
    return scaled_float64(scaled_for_rank(torch.as_tensor(x), scaling)).numpy()


def assert_same_profile(host, device):
    np.testing.assert_array_equal(host.m, device.m)
    np.testing.assert_array_equal(host.p, device.p)
    assert (host.estimate, host.upper_bound, host.lower_bound) == (
        device.estimate,
        device.upper_bound,
        device.lower_bound,
    )
    assert host.certificates == device.certificates
    assert host.route == device.route == "gram"


@pytest.mark.parametrize("case", sorted(CASES))
def test_device_search_gives_the_host_profile(case):
    x = CASES[case]()
    host = kruskal_profile(x, 60, seed=7, search="host")
    device = kruskal_profile(x, 60, seed=7, search="device")
    assert (host.search, device.search) == ("host", "device")
    assert_same_profile(host, device)


@pytest.mark.parametrize("scaling", ["none", "equilibrate"])
def test_device_search_agrees_with_direct_svds_and_spans_dependence(scaling):
    x = embedding_like(120, 40, seed=5)
    profile = kruskal_profile(x, 40, seed=2, search="device", scaling=scaling)
    tau = matrix_rank_rtol(40, 40, np.float32)
    scaled = decided_on(x, scaling)  # none: paper A's rule on the stored values
    order = orderings(120, 40, seed=2, size=40).numpy()
    expected = [reference_m(scaled, row, tau) for row in order]
    np.testing.assert_array_equal(profile.m, expected)
    assert len(set(expected)) > 3 and max(expected) < 40  # the search had work to do


def test_rank_deficient_and_duplicated_sets_are_certified_alike():
    deficient = kruskal_profile(rank_deficient(80, 36, 23, seed=2), 30, search="device")
    assert deficient.estimate == deficient.upper_bound == 23
    dup = kruskal_profile(duplicated(64, 24, seed=3), 30, search="device")
    assert dup.upper_bound == 0 and dup.lower_bound == 0
    assert {c.kind for c in dup.certificates} >= {"zero_vector", "dependent_pair"}


def test_batches_and_hints_do_not_change_the_m():
    x = embedding_like(100, 32, seed=6)
    one = kruskal_profile(x, 25, seed=1, search="device")
    many = kruskal_profile(x, 70, seed=1, search="device")  # more batches, same first 25
    np.testing.assert_array_equal(one.m, many.m[:25])


def problem_for(x: np.ndarray):
    data = torch.as_tensor(x)
    tau = matrix_rank_rtol(min(x.shape), x.shape[1], data.dtype)
    scaled = scaled_float64(data)
    _, singular, vh = torch.linalg.svd(scaled, full_matrices=False)
    return prepare(scaled, singular, vh, tau, "gram", "device")


def test_breakdowns_brackets_and_ratios_match_eigendecompositions():
    problem = problem_for(embedding_like(60, 24, seed=8))
    idx = orderings(60, 6, seed=3, size=24)
    gram = gather_gram(problem, idx)
    x = problem.x.numpy()
    t = torch.tensor([3, 10, 24, 17, 1, 20])
    n = torch.tensor([24, 12, 24, 20, 5, 24])
    shift = torch.tensor([1e-3, 1e-6, 1e-9, 1e-5, 1e-2, 1e-8], dtype=torch.float64)
    j = breakdowns(gram.clone(), n, shift)
    low, high = sigma_max_brackets(problem, gram, idx, t)
    ratio = extreme_ratio(gram, t)
    for b in range(6):
        rows = x[idx[b].numpy()]
        np.testing.assert_allclose(gram[b].numpy(), rows @ rows.T)
        lam_min = [np.linalg.eigvalsh(rows[:k] @ rows[:k].T)[0] for k in range(1, 25)]
        below = [k + 1 for k in range(int(n[b])) if lam_min[k] <= float(shift[b])]
        assert int(j[b]) == (below[0] if below else int(n[b]) + 1)
        values = np.linalg.eigvalsh(rows[: t[b]] @ rows[: t[b]].T)
        assert float(low[b]) <= values[-1] <= float(high[b])
        assert float(ratio[b]) == pytest.approx(values[0] / values[-1], rel=1e-6, abs=1e-15)


def test_window_narrows_by_the_two_tests():
    window = Window(lo=0, hi=40, point=30)
    assert window.next_test() == (30, False)
    window.record(30, False, j=21, n=38)  # independence test broke down at 21
    assert (window.lo, window.hi) == (20, 40) and window.next_test() == (21, True)
    window.record(21, True, j=21, n=29)  # dependence test: 21 and above dependent
    assert (window.lo, window.hi) == (20, 20) and not window.open
    stuck = Window(lo=5, hi=9, point=7)
    stuck.record(7, False, j=7, n=9)  # independence test at 7 fails at 7
    stuck.record(7, True, j=10, n=9)  # dependence test at 7 does not break down
    assert stuck.open and stuck.next_test() is None  # both ran at 7: an exact decision
    upward = Window(lo=5, hi=30, point=12)
    upward.record(12, True, j=18, n=20)  # 12 is not dependent; 18 and above are
    assert (upward.lo, upward.hi) == (5, 17) and upward.next_test() == (17, False)
    upward.record(17, False, j=22, n=25)  # 17 independent
    assert not upward.open and upward.lo == 17


@pytest.mark.parametrize("scaling", ["none", "equilibrate"])
def test_borderline_orderings_go_to_the_host_search(monkeypatch, scaling):
    x = embedding_like(80, 24, seed=9)
    scaled = decided_on(x, scaling)
    order = orderings(80, 5, seed=4, size=24).numpy()
    ratios = [
        (lambda v: v[-1] / v[0])(np.linalg.svd(scaled[order[0][:k]], compute_uv=False))
        for k in range(1, 25)
    ]
    k = next(k for k in range(1, 25) if ratios[k - 1] < 1e-3)  # a prefix Gram resolves
    rtol = float(ratios[k - 1]) * (1 + 1e-7)  # prefix k sits on the tolerance
    assert reference_m(scaled, order[0], rtol) == k - 1
    deferred = []
    original = batched_search.search_on_host

    def spy(problem, order, hint):
        deferred.extend(tuple(row[:k]) for row in order.tolist())
        return original(problem, order, hint)

    monkeypatch.setattr(batched_search, "search_on_host", spy)
    options = {"rtol": rtol, "method": "gram", "scaling": scaling}
    host = kruskal_profile(x, 5, seed=4, search="host", **options)
    device = kruskal_profile(x, 5, seed=4, search="device", **options)
    assert tuple(order[0, :k].tolist()) in deferred
    assert_same_profile(host, device)


def test_search_device_returns_a_hint_and_checks_the_solver():
    problem = problem_for(embedding_like(50, 20, seed=10))
    m, hint = search_device(problem, orderings(50, 9, seed=0, size=20), None)
    assert m.shape == (9,) and 1 <= hint.start <= 20
    check_breakdown_index(torch.device("cpu"))  # LAPACK's info: passes


def test_choice_of_search_and_config():
    assert choose_search("auto", torch.device("cpu")) == "host"
    assert choose_search("auto", torch.device("cuda")) == "device"
    assert choose_search("device", torch.device("cpu")) == "device"
    with pytest.raises(ValueError, match="search must be auto, host or device"):
        choose_search("gpu", torch.device("cpu"))
    config = {"assumptions": {"kruskal_search": "device", "seed": 0}}
    validate(config, "workflow/schemas/config.schema.yaml")
    settings = AssumptionsSettings.from_config(config["assumptions"])
    band = settings.band(embedding_like(40, 16, 0), 5, "cpu", 1)
    assert {p.search for p in (band.profile, band.strict, band.loose)} == {"device"}
    assert settings.raw(embedding_like(40, 16, 0), 5, "cpu", 1).search == "device"
    default = {}
    validate(default, "workflow/schemas/config.schema.yaml")
    # the device search is opt-in until it has been checked and timed on a GPU
    assert AssumptionsSettings.from_config(default["assumptions"]).kruskal_search == "host"
