"""memcap.numerics.context_ranks: streamed ranks equal in-memory ranks and direct SVD ranks."""

import numpy as np
import pytest

from memcap.numerics import context_ranks, rank_histogram


def contexts_with_known_ranks(
    t: int, n: int, d: int, seed: int, dtype=np.float32
) -> tuple[np.ndarray, np.ndarray]:
    """Contexts of rank min(n, d), except #3 (a repeated token), #7 (rank 2) and #9 (zero)."""
    rng = np.random.default_rng(seed)
    contexts = rng.standard_normal((t, n, d)) + np.arange(n)[:, None] * 0.05  # positions
    expected = np.full(t, min(n, d))
    contexts[3, n - 1] = contexts[3, 1]  # a repeated token (padding)
    expected[3] = min(n, d) - 1
    low = rng.standard_normal((n, 2)) @ rng.standard_normal((2, d))
    contexts[7] = low  # rank 2
    expected[7] = 2
    contexts[9] = 0.0
    expected[9] = 0
    return contexts.astype(dtype), expected


def write_npy(path, array):
    out = np.lib.format.open_memmap(path, mode="w+", dtype=array.dtype, shape=array.shape)
    for start in range(0, len(array), 4):  # written in chunks, like the extraction stage
        out[start : start + 4] = array[start : start + 4]
    out.flush()
    del out


def test_streamed_ranks_equal_in_memory_ranks_and_direct_svd(tmp_path):
    contexts, expected = contexts_with_known_ranks(t=21, n=12, d=40, seed=0)
    path = tmp_path / "contexts.npy"
    write_npy(path, contexts)
    streamed = context_ranks(np.load(path, mmap_mode="r"), chunk=4)
    in_memory = context_ranks(contexts, chunk=len(contexts))
    np.testing.assert_array_equal(streamed.rank, expected)
    np.testing.assert_array_equal(streamed.rank, in_memory.rank)
    np.testing.assert_allclose(streamed.sigma_min, in_memory.sigma_min, rtol=1e-12, atol=0)
    np.testing.assert_allclose(streamed.sigma_max, in_memory.sigma_max, rtol=1e-12)
    direct = [np.linalg.matrix_rank(c) for c in contexts]  # numpy's rule on float32 values
    np.testing.assert_array_equal(streamed.rank, direct)
    full = np.linalg.svd(contexts[0].astype(np.float64), compute_uv=False)
    assert streamed.sigma_min[0] == pytest.approx(full[-1], rel=1e-6)
    assert streamed.sigma_max[0] == pytest.approx(full[0], rel=1e-12)
    assert streamed.rtol == pytest.approx(40 * np.finfo(np.float32).eps)


def test_full_rank_fraction_margins_and_histogram():
    contexts, _ = contexts_with_known_ranks(t=12, n=6, d=16, seed=1)
    ranks = context_ranks(contexts, chunk=5)
    assert ranks.full_rank.sum() == 12 - 3
    assert rank_histogram(ranks) == {0: 1, 2: 1, 5: 1, 6: 9}
    margins = ranks.margin_decades
    assert np.all(margins[ranks.full_rank] > 0)
    assert np.all(margins[~ranks.full_rank] < 0)
    assert margins[9] == -np.inf  # the zero context


def test_more_tokens_than_dimensions_is_never_full_rank():
    contexts = np.random.default_rng(2).standard_normal((5, 10, 4)).astype(np.float32)
    ranks = context_ranks(contexts)
    assert ranks.rank.tolist() == [4] * 5
    assert not ranks.full_rank.any()


def test_float64_contexts_take_the_direct_svd_where_the_gram_cannot_decide():
    contexts, expected = contexts_with_known_ranks(t=10, n=8, d=12, seed=3, dtype=np.float64)
    ranks = context_ranks(contexts)
    np.testing.assert_array_equal(ranks.rank, expected)
    # τ² lies below the Gram matrix's rounding: the two rank-deficient nonzero contexts (#3, #7)
    # have eigenvalues inside the band; full-rank ones stand far above it
    assert ranks.svd_checked == 2
    direct = np.linalg.svd(contexts, compute_uv=False)
    np.testing.assert_allclose(ranks.sigma_min[expected == 8], direct[expected == 8, -1], rtol=1e-9)


def test_wide_float32_contexts_are_decided_through_the_gram_matrix():
    """n = 200, d = 300 (DINOv2-S/14's 257 × 384 in small): τ² stands ~100x above the proven
    Gram error band, so only the contexts with an eigenvalue at the tolerance take an SVD."""
    contexts, expected = contexts_with_known_ranks(t=10, n=200, d=300, seed=6)
    ranks = context_ranks(contexts, chunk=4)
    np.testing.assert_array_equal(ranks.rank, expected)
    np.testing.assert_array_equal(ranks.rank, [np.linalg.matrix_rank(c) for c in contexts])
    assert ranks.svd_checked == 0  # rank-deficient ones too: their zeros sit far below τ²


def test_context_near_the_tolerance_is_rechecked_by_svd():
    rng = np.random.default_rng(4)
    n, d = 6, 16
    u, _ = np.linalg.qr(rng.standard_normal((n, n)))
    v, _ = np.linalg.qr(rng.standard_normal((d, n)))
    rtol = 1e-3
    singular = np.array([1, 0.5, 0.1, 0.01, 0.002, rtol * (1 + 1e-13)])
    context = (u * singular) @ v.T
    ranks = context_ranks(context[None], rtol=rtol)
    assert ranks.svd_checked == 1
    direct = np.linalg.svd(context, compute_uv=False)
    assert ranks.rank[0] == int((direct > rtol * direct[0]).sum())


def test_configured_tolerance_is_used():
    contexts, _ = contexts_with_known_ranks(t=12, n=5, d=9, seed=5)
    loose = context_ranks(contexts, rtol=0.5)
    assert loose.rtol == 0.5
    assert loose.rank.max() < 5
