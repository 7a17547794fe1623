"""memcap.numerics.context_ranks: streamed ranks equal in-memory ranks and direct SVD ranks."""

import numpy as np
import pytest
import torch

from memcap.numerics import (
    balance,
    context_ranks,
    load_context_ranks,
    rank_histogram,
    save_context_ranks,
)


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


def balanced(contexts: np.ndarray) -> np.ndarray:
    """Each context equilibrated, as the default scaling decides on it (float64)."""
    return balance(torch.from_numpy(np.asarray(contexts, dtype=np.float64))).values.numpy()


def write_npy(path, array):
    out = np.lib.format.open_memmap(path, mode="w+", dtype=array.dtype, shape=array.shape)
    for start in range(0, len(array), 4):  # written in chunks, like the extraction stage
        out[start : start + 4] = array[start : start + 4]
    out.flush()
    del out


@pytest.mark.parametrize("scaling", ["none", "equilibrate"])
def test_streamed_ranks_equal_in_memory_ranks_and_direct_svd(tmp_path, scaling):
    contexts, expected = contexts_with_known_ranks(t=21, n=12, d=40, seed=0)
    path = tmp_path / "contexts.npy"
    write_npy(path, contexts)
    streamed = context_ranks(np.load(path, mmap_mode="r"), chunk=4, scaling=scaling)
    in_memory = context_ranks(contexts, chunk=len(contexts), scaling=scaling)
    assert streamed.scaling == in_memory.scaling == scaling
    np.testing.assert_array_equal(streamed.rank, expected)
    np.testing.assert_array_equal(streamed.rank, in_memory.rank)
    # σ_min of a rank-deficient context is rounding (~1e-16·σ_max): compare it on that scale
    np.testing.assert_allclose(
        streamed.sigma_min, in_memory.sigma_min, rtol=1e-12, atol=1e-12 * streamed.sigma_max.max()
    )
    np.testing.assert_allclose(streamed.sigma_max, in_memory.sigma_max, rtol=1e-12)
    rtol = 40 * np.finfo(np.float32).eps
    assert streamed.rtol == pytest.approx(rtol)
    if scaling == "none":  # paper A's rule: numpy's matrix_rank on the stored float32 values
        values = contexts.astype(np.float64)
        direct = [np.linalg.matrix_rank(c) for c in contexts]
        assert streamed.raw is None
    else:  # the same rule on each context equilibrated; the stored values' ranks beside
        values = balanced(contexts)
        direct = [np.linalg.matrix_rank(c, rtol=rtol) for c in values]
        np.testing.assert_array_equal(streamed.raw.rank, expected)
        np.testing.assert_array_equal(
            streamed.raw.rank, [np.linalg.matrix_rank(c) for c in contexts]
        )
        assert streamed.raw.scaling == "none" and streamed.raw.rtol == streamed.rtol
    np.testing.assert_array_equal(streamed.rank, direct)
    full = np.linalg.svd(values[0], compute_uv=False)
    assert streamed.sigma_min[0] == pytest.approx(full[-1], rel=1e-6)
    assert streamed.sigma_max[0] == pytest.approx(full[0], rel=1e-12)
    # the exact proofs of deficiency, counted on the stored values whatever the scaling
    assert streamed.repeated_rows.tolist() == [0, 0, 0, 1] + [0] * 5 + [11] + [0] * 11
    assert streamed.zero_rows.tolist() == [0] * 9 + [12] + [0] * 11


def test_saved_ranks_load_back_with_their_raw_twin(tmp_path):
    contexts, _ = contexts_with_known_ranks(t=12, n=6, d=16, seed=1)
    for scaling in ("equilibrate", "none"):
        ranks = context_ranks(contexts, chunk=5, scaling=scaling)
        save_context_ranks(tmp_path / f"{scaling}.npz", ranks)
        back = load_context_ranks(tmp_path / f"{scaling}.npz")
        assert back.scaling == scaling
        for twin, original in ((back, ranks), (back.raw, ranks.raw)):
            if original is None:
                assert twin is None
                continue
            for name in ("rank", "sigma_min", "sigma_max", "tolerance", "repeated_rows"):
                np.testing.assert_array_equal(getattr(twin, name), getattr(original, name))
            assert (twin.n, twin.d, twin.rtol, twin.svd_checked, twin.scaling) == (
                original.n, original.d, original.rtol, original.svd_checked, original.scaling
            )  # fmt: skip


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


@pytest.mark.parametrize("scaling", ["none", "equilibrate"])
def test_float64_contexts_take_the_direct_svd_where_the_gram_cannot_decide(scaling):
    contexts, expected = contexts_with_known_ranks(t=10, n=8, d=12, seed=3, dtype=np.float64)
    ranks = context_ranks(contexts, scaling=scaling)
    np.testing.assert_array_equal(ranks.rank, expected)
    # τ² lies below the Gram matrix's rounding: the two rank-deficient nonzero contexts (#3, #7)
    # have eigenvalues inside the band; full-rank ones stand far above it (and, equilibrated,
    # more than a decade above the tolerance: no exact σ_min needed for the decision band)
    assert ranks.svd_checked == 2
    values = contexts if scaling == "none" else balanced(contexts)
    direct = np.linalg.svd(values, compute_uv=False)
    np.testing.assert_allclose(ranks.sigma_min[expected == 8], direct[expected == 8, -1], rtol=1e-9)


def test_wide_float32_contexts_are_decided_through_the_gram_matrix():
    """n = 200, d = 300 (DINOv2-S/14's 257 × 384 in small): τ² stands ~100x above the proven
    Gram error band, so only the contexts with an eigenvalue at the tolerance take an SVD."""
    contexts, expected = contexts_with_known_ranks(t=10, n=200, d=300, seed=6)
    ranks = context_ranks(contexts, chunk=4, scaling="none")
    np.testing.assert_array_equal(ranks.rank, expected)
    np.testing.assert_array_equal(ranks.rank, [np.linalg.matrix_rank(c) for c in contexts])
    assert ranks.svd_checked == 0  # rank-deficient ones too: their zeros sit far below τ²
    # Equilibrated (the default): the same ranks, numpy's rule on the balanced values; the two
    # rank-deficient nonzero contexts (#3, #7) are not a decade above the tolerance, so they
    # take an SVD for their exact σ_min (the decision band), the full-rank ones do not.
    equilibrated = context_ranks(contexts, chunk=4)
    np.testing.assert_array_equal(equilibrated.rank, expected)
    np.testing.assert_array_equal(
        equilibrated.rank,
        [np.linalg.matrix_rank(c, rtol=equilibrated.rtol) for c in balanced(contexts)],
    )
    assert equilibrated.svd_checked == 2
    assert np.all(equilibrated.margin_decades[expected == 200] > 1)
    np.testing.assert_array_equal(equilibrated.raw.rank, ranks.rank)
    assert equilibrated.raw.svd_checked == 0


def test_context_near_the_tolerance_is_rechecked_by_svd():
    rng = np.random.default_rng(4)
    n, d = 6, 16
    u, _ = np.linalg.qr(rng.standard_normal((n, n)))
    v, _ = np.linalg.qr(rng.standard_normal((d, n)))
    rtol = 1e-3
    singular = np.array([1, 0.5, 0.1, 0.01, 0.002, rtol * (1 + 1e-13)])
    context = (u * singular) @ v.T
    ranks = context_ranks(context[None], rtol=rtol, scaling="none")
    assert ranks.svd_checked == 1
    direct = np.linalg.svd(context, compute_uv=False)
    assert ranks.rank[0] == int((direct > rtol * direct[0]).sum())
    # Equilibrated: a context within a decade of the tolerance takes an SVD too (the band)
    equilibrated = context_ranks(context[None], rtol=rtol)
    assert equilibrated.svd_checked == 1
    (values,) = balanced(context[None])
    direct = np.linalg.svd(values, compute_uv=False)
    assert equilibrated.rank[0] == int((direct > rtol * direct[0]).sum())
    assert equilibrated.sigma_min[0] == pytest.approx(direct[-1], rel=1e-9)
    assert -1 < equilibrated.margin_decades[0] < 1


def test_configured_tolerance_is_used():
    contexts, _ = contexts_with_known_ranks(t=12, n=5, d=9, seed=5)
    loose = context_ranks(contexts, rtol=0.5, scaling="none")
    assert loose.rtol == 0.5
    assert loose.rank.max() < 5
    # Equilibrated contexts are better conditioned: some keep rank 5 at rtol = 0.5, and each
    # rank is numpy's rule at that tolerance on the balanced values
    equilibrated = context_ranks(contexts, rtol=0.5)
    assert equilibrated.rtol == equilibrated.raw.rtol == 0.5
    np.testing.assert_array_equal(equilibrated.raw.rank, loose.rank)
    np.testing.assert_array_equal(
        equilibrated.rank, [np.linalg.matrix_rank(c, rtol=0.5) for c in balanced(contexts)]
    )
    assert np.all(equilibrated.rank >= loose.rank) and equilibrated.rank.max() == 5


def test_unknown_scaling_is_refused():
    with pytest.raises(ValueError, match="scaling must be one of"):
        context_ranks(np.ones((1, 2, 3), dtype=np.float32), scaling="standardize")
