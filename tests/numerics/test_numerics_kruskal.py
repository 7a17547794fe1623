"""memcap.numerics.kruskal_profile: exact ground truth, float32 rounding, certificates, SVD."""

import numpy as np
import pytest
import torch

from memcap.numerics import (
    balance,
    clopper_pearson,
    kruskal_profile,
    matrix_rank_rtol,
    orderings,
)

SCALINGS = ["none", "equilibrate"]


def subspace_data(t: int, d: int, k: int, seed: int) -> np.ndarray:
    """t generic vectors in a random k-dimensional subspace of R^d (float64)."""
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.standard_normal((d, k)))
    return rng.standard_normal((t, k)) @ basis.T


def decided_on(x: np.ndarray, scaling: str) -> np.ndarray:
    """The float64 values a profile with ``scaling`` decides on: stored, or the set balanced."""
    if scaling == "none":
        return np.asarray(x, dtype=np.float64)
    return balance(torch.as_tensor(x)).values.numpy()


def svd_independent(rows: np.ndarray, rtol: float) -> bool:
    """The reference decision: float64 SVD of the stored values, σ_min > rtol·σ_max."""
    s = np.linalg.svd(np.asarray(rows, dtype=np.float64), compute_uv=False)
    return len(s) == len(rows) and s[0] > 0 and s[-1] > rtol * s[0]


def reference_m(x: np.ndarray, order: np.ndarray, rtol: float) -> int:
    """Leading independent prefix length by bisection over direct SVDs."""
    lo, hi = 0, len(order)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if svd_independent(x[order[:mid]], rtol):
            lo = mid
        else:
            hi = mid - 1
    return lo


@pytest.mark.parametrize("k", [1, 2, 6, 11, 12])
def test_float64_subspace_has_kruskal_rank_exactly_k(k):
    x = subspace_data(t=30, d=12, k=k, seed=k)
    profile = kruskal_profile(x, samples=200, seed=1)
    assert profile.route == "qr"
    assert profile.estimate == k
    assert profile.upper_bound == k
    assert profile.p[: k + 1].tolist() == [1.0] * (k + 1)
    assert not profile.p[k + 1 :].any()
    assert profile.p.shape == (13,)


def test_float64_subspace_of_dimension_d_minus_one_at_larger_d():
    x = subspace_data(t=90, d=64, k=63, seed=3)
    profile = kruskal_profile(x, samples=30, seed=0)
    assert profile.estimate == profile.upper_bound == 63
    assert profile.p[63] == 1.0 and profile.p[64] == 0.0


@pytest.mark.parametrize("method", ["gram", "qr"])
@pytest.mark.parametrize("k", [1, 4, 23, 47])
def test_float32_never_calls_a_dependent_set_independent(k, method):
    x = subspace_data(t=80, d=48, k=k, seed=10 + k).astype(np.float32)
    profile = kruskal_profile(x, samples=150, seed=2, method=method)
    assert profile.p[k + 1 :].max(initial=0.0) == 0.0
    assert profile.m.max() <= k
    assert profile.upper_bound <= k
    # Independent k-subsets may fall under the tolerance only when ill-conditioned: rarely.
    assert profile.p[k] >= 0.95


def test_auto_route_uses_gram_for_float32_and_qr_for_float64():
    x = subspace_data(t=40, d=32, k=32, seed=0)
    assert kruskal_profile(x.astype(np.float32), samples=5).route == "gram"
    assert kruskal_profile(x, samples=5).route == "qr"
    # d < 16: float32's tolerance squared is too close to float64 rounding for Gram matrices.
    assert kruskal_profile(x[:, :8].astype(np.float32), samples=5).route == "qr"


def test_duplicated_vectors_give_kruskal_rank_one():
    x = subspace_data(t=25, d=10, k=10, seed=4)
    x[7] = x[3]
    profile = kruskal_profile(x.astype(np.float32), samples=50)
    assert profile.estimate == profile.upper_bound == profile.lower_bound == 1
    assert profile.pairs.duplicate_pairs == 1 and profile.pairs.dependent_pairs == 1
    assert {3, 7} == set(profile.pairs.example)
    kinds = {c.kind for c in profile.certificates}
    assert "dependent_pair" in kinds
    assert all(c.verified for c in profile.certificates)


def test_identical_queries_everywhere_give_kruskal_rank_one_and_no_independent_pair():
    x = np.tile(np.linspace(-1, 1, 16, dtype=np.float32), (30, 1))
    profile = kruskal_profile(x, samples=40)
    assert profile.estimate == 1
    assert profile.p[1] == 1.0 and profile.p[2] == 0.0
    assert profile.pairs.dependent_pairs == 30 * 29 // 2
    assert profile.spectral_cap == 1


def test_near_duplicate_below_the_tolerance_is_a_dependent_pair():
    x = subspace_data(t=20, d=32, k=32, seed=5)
    x[5] = x[2] * (1 + 1e-9)  # a near-duplicate: far below float32's tolerance
    x[9] = x[4] + 1e-3 * x[1]  # close (cosine > 0.999) but clearly independent
    profile = kruskal_profile(x.astype(np.float32), samples=20, near_duplicate_cosine=0.999)
    assert profile.pairs.dependent_pairs == 1
    assert profile.pairs.near_duplicate_pairs == 2
    assert profile.upper_bound == 1


def test_zero_vector_gives_kruskal_rank_zero():
    x = subspace_data(t=12, d=8, k=8, seed=6)
    x[4] = 0.0
    profile = kruskal_profile(x, samples=30)
    assert profile.estimate == profile.upper_bound == profile.lower_bound == 0
    assert profile.pairs.zero_rows == 1


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_scaling_the_data_does_not_change_the_answer(dtype):
    x = subspace_data(t=60, d=24, k=17, seed=7)
    x[11] = x[3]
    for scaling in SCALINGS:
        reference = kruskal_profile(x.astype(dtype), samples=80, seed=3, scaling=scaling)
        assert reference.scaling == scaling
        for scale in (1e-6, 1e6):
            scaled = kruskal_profile((x * scale).astype(dtype), samples=80, seed=3, scaling=scaling)
            np.testing.assert_array_equal(scaled.m, reference.m)
            assert scaled.estimate == reference.estimate
            assert scaled.upper_bound == reference.upper_bound
            assert scaled.lower_bound == reference.lower_bound


def anisotropic(t: int, d: int, seed: int, decay: float = 0.3) -> np.ndarray:
    """Embedding-like float32 queries: a mean plus an exponentially decaying spectrum."""
    rng = np.random.default_rng(seed)
    spectrum = np.exp(-decay * np.arange(d))
    basis, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return (rng.standard_normal(d) * 2 + (rng.standard_normal((t, d)) * spectrum) @ basis.T).astype(
        np.float32
    )


@pytest.mark.parametrize("scaling", SCALINGS)
@pytest.mark.parametrize("method", ["gram", "qr"])
def test_sampled_prefix_decisions_agree_with_direct_svd(method, scaling):
    x = anisotropic(t=120, d=48, seed=8)
    profile = kruskal_profile(x, samples=60, seed=5, method=method, scaling=scaling)
    # The data turn dependent well before d, gradually: a real test of the crossing search.
    assert profile.m.min() > 10 and profile.m.max() < 48
    order = orderings(120, 60, seed=5, size=min(48, profile.spectral_cap)).numpy()
    values = decided_on(x, scaling)  # none: paper A's rule on the stored values
    expected = [reference_m(values, o, profile.rtol) for o in order]
    np.testing.assert_array_equal(profile.m, expected)


def embedding_like(t: int, d: int, seed: int, mean: float) -> np.ndarray:
    """float32 vectors with a decaying covariance spectrum and a mean of norm ``mean``."""
    rng = np.random.default_rng(seed)
    spectrum = np.arange(1, d + 1) ** -0.5 * np.exp(-np.arange(d) / (d / 10))
    basis, _ = np.linalg.qr(rng.standard_normal((d, d)))
    offset = rng.standard_normal(d)
    offset *= mean / np.linalg.norm(offset)
    return (offset + (rng.standard_normal((t, d)) * spectrum) @ basis.T).astype(np.float32)


@pytest.mark.parametrize("scaling", SCALINGS)
@pytest.mark.parametrize("mean", [0.0, 5.0])
def test_search_agrees_with_direct_svd_with_and_without_a_dominant_direction(mean, scaling):
    # With a mean, σ_max of a prefix stands out and is bracketed by Kato–Temple; without one
    # the projection bracket is used. Both cross well inside (0, d), over several batches.
    x = embedding_like(t=400, d=160, seed=11, mean=mean)
    profile = kruskal_profile(x, samples=120, seed=2, method="gram", scaling=scaling)
    assert 20 < profile.m.min() < profile.m.max() < 160
    order = orderings(400, 120, seed=2, size=min(160, profile.spectral_cap)).numpy()
    values = decided_on(x, scaling)
    expected = [reference_m(values, o, profile.rtol) for o in order]
    np.testing.assert_array_equal(profile.m, expected)
    if scaling == "none":
        return
    # Forked workers search batches in parallel: the same answer, the same witness.
    parallel = kruskal_profile(x, samples=120, seed=2, method="gram", workers=2)
    np.testing.assert_array_equal(parallel.m, profile.m)
    assert parallel.certificates == profile.certificates


def test_ill_conditioned_subsets_fall_under_the_tolerance_no_more_often_than_with_svd():
    # Independent in exact arithmetic, but some n-subsets sit near the tolerance.
    rng = np.random.default_rng(9)
    d, t, n = 24, 80, 24
    x = (rng.standard_normal((t, d)) * np.logspace(0, -4.5, d)).astype(np.float32)
    profile = kruskal_profile(x, samples=300, seed=4, scaling="none")  # paper A's rule
    order = orderings(t, 300, seed=4, size=n).numpy()
    ours = profile.m >= n
    float64_svd = np.array([svd_independent(x[o], profile.rtol) for o in order])
    torch_float32 = np.array(  # paper A's call, on the stored float32 values
        [torch.linalg.matrix_rank(torch.from_numpy(x[o])).item() == n for o in order]
    )
    np.testing.assert_array_equal(ours, float64_svd)
    assert 0.05 < 1 - ours.mean() < 0.95  # the data do exercise the tolerance
    assert 1 - ours.mean() <= 1 - torch_float32.mean() + 0.05
    # Equilibrated (the default): the coordinates' scales are what made these subsets
    # ill-conditioned; balanced, every sampled subset clears the tolerance, as a direct SVD of
    # the balanced values says.
    equilibrated = kruskal_profile(x, samples=300, seed=4)
    balanced = decided_on(x, "equilibrate")
    np.testing.assert_array_equal(
        equilibrated.m >= n, [svd_independent(balanced[o], profile.rtol) for o in order]
    )
    assert equilibrated.p[n] == 1.0 and equilibrated.rtol == profile.rtol


def test_profile_api_and_confidence():
    x = anisotropic(t=50, d=20, seed=10)
    profile = kruskal_profile(x, samples=40)
    assert profile.p[0] == 1.0 and profile.p.size == 21
    assert np.all(np.diff(profile.p) <= 0)
    assert profile.samples == 40
    assert profile.rtol == pytest.approx(matrix_rank_rtol(20, 20, np.float32))
    low, high = profile.interval(profile.estimate)
    assert high == 1.0 and low == pytest.approx(0.025 ** (1 / 40))
    assert clopper_pearson(0, 40) == (0.0, pytest.approx(1 - 0.025 ** (1 / 40)))
    # P(k) = 1 over S samples: the dependent fraction is below 1 − 0.05^(1/S) ≈ 3/S.
    assert profile.dependent_fraction_bound(profile.estimate) == pytest.approx(1 - 0.05 ** (1 / 40))


def test_orderings_do_not_depend_on_batching():
    everything = orderings(200, 50, seed=11, size=200)
    assert sorted(everything[7].tolist()) == list(range(200))
    assert torch.equal(orderings(200, 20, seed=11, size=30), everything[:20, :30])


def test_rejects_bad_input():
    with pytest.raises(ValueError, match="scaling must be one of"):
        kruskal_profile(np.eye(3), samples=2, scaling="unit")
    with pytest.raises(ValueError, match="non-empty"):
        kruskal_profile(np.zeros((0, 3)), samples=5)
    with pytest.raises(ValueError, match="samples"):
        kruskal_profile(np.ones((3, 3)), samples=0)
    with pytest.raises(ValueError, match="workers"):
        kruskal_profile(np.ones((3, 3)), samples=5, workers=0)
    with pytest.raises(ValueError, match="inf or nan"):
        kruskal_profile(np.full((3, 3), np.nan), samples=2)
    with pytest.raises(ValueError, match="method"):
        kruskal_profile(np.eye(3), samples=2, method="lu")
