"""The context ranks' device-side work (balance, Gram matrices, row defects batched over a chunk)
and host-side solves (eigenvalues, SVDs, on a pool of threads as on a GPU) equal the plain path.

On a GPU the Gram matrices come from cuBLAS and the solves run on a pool while the next batch's
forward runs; here the same code runs on CPU tensors, with the pool forced where a GPU run has
one, and a Gram matrix formed by another reduction order stands in for cuBLAS's rounding.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

from memcap.numerics import ContextRankStream, context_ranks
from memcap.numerics.context_rank import exact_row_defects, gram_matrices, host_ranks
from memcap.numerics.equilibrate import scaled_for_rank


def awkward_contexts(t: int = 40, n: int = 12, d: int = 24, seed: int = 0) -> np.ndarray:
    """Contexts with every kind of decision: full rank, a repeated row, rows repeated across
    contexts, zero rows, signed zeros, rank 2, and one a hair above the tolerance (an SVD)."""
    rng = np.random.default_rng(seed)
    contexts = rng.standard_normal((t, n, d)) + np.arange(n)[:, None] * 0.05
    contexts[3, 5] = contexts[3, 1]  # repeated within a context
    contexts[4, 0] = contexts[3, 1]  # the same row in another context: not a repeat there
    contexts[6, 2:5] = 0.0  # three zero rows: two repeats
    contexts[8, 1] = -0.0
    contexts[8, 2] = 0.0  # -0.0 == 0.0: a repeat, as torch.unique compares
    contexts[11] = rng.standard_normal((n, 2)) @ rng.standard_normal((2, d))  # rank 2
    contexts[13] = 0.0
    u, _ = np.linalg.qr(rng.standard_normal((n, n)))
    v, _ = np.linalg.qr(rng.standard_normal((d, n)))
    tau = max(n, d) * np.finfo(np.float32).eps
    contexts[17] = (u * np.geomspace(1.0, tau * 3, n)) @ v.T  # within the band: an SVD
    return contexts.astype(np.float32)


def per_context_defects(block: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The reference: one ``torch.unique`` per context."""
    distinct = torch.tensor([torch.unique(rows, dim=0).shape[0] for rows in block])
    return block.shape[1] - distinct, (block == 0).all(dim=-1).sum(dim=-1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_row_defects_of_a_whole_chunk_equal_one_unique_per_context(dtype):
    block = torch.from_numpy(awkward_contexts()).to(dtype)
    repeated, zero = exact_row_defects(block)
    expected_repeated, expected_zero = per_context_defects(block)
    assert torch.equal(repeated, expected_repeated) and torch.equal(zero, expected_zero)
    assert repeated[[3, 4, 6, 8, 13]].tolist() == [1, 0, 2, 1, 11]


def test_ranks_solved_on_a_pool_equal_ranks_solved_inline():
    contexts = awkward_contexts()
    inline = ContextRankStream(12, 24)
    with ThreadPoolExecutor(3) as pool:
        pooled = ContextRankStream(12, 24, pool=pool)
        for start in range(0, len(contexts), 5):  # 8 chunks: more than MAX_PENDING wait
            inline.add(contexts[start : start + 5])
            pooled.add(torch.from_numpy(contexts[start : start + 5]))
        ours = pooled.result()
    theirs = inline.result()
    assert theirs.svd_checked >= 1 and theirs.rank[11] == 2 and theirs.rank[13] == 0
    for a, b in ((ours, theirs), (ours.raw, theirs.raw)):
        for name in ("rank", "sigma_min", "sigma_max", "tolerance", "repeated_rows", "zero_rows"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
        assert (a.svd_checked, a.scaling, a.rtol) == (b.svd_checked, b.scaling, b.rtol)


@pytest.mark.parametrize("scaling", ["none", "equilibrate"])
def test_decisions_do_not_depend_on_how_the_gram_matrices_were_rounded(scaling):
    """A GPU forms the Gram matrices with another summation order than the host's BLAS: every
    decision is the same, and σ within the proven band of each other."""
    stored = torch.from_numpy(awkward_contexts(seed=1))
    block = scaled_for_rank(stored, scaling)
    tau = 24 * float(np.finfo(np.float32).eps)  # max(n, d)·eps32
    ours = host_ranks(gram_matrices(block), block, tau, scaling != "none")
    # another rounding: products summed coordinate by coordinate in reverse order
    reordered = torch.zeros_like(gram_matrices(block))
    for k in reversed(range(block.shape[2])):
        column = block[:, :, k]
        reordered += column[:, :, None] * column[:, None, :]
    assert not torch.equal(reordered, gram_matrices(block))
    theirs = host_ranks(reordered, block, tau, scaling != "none")
    np.testing.assert_array_equal(ours[0], theirs[0])  # ranks
    np.testing.assert_array_equal(ours[3], theirs[3])  # which contexts took the SVD
    scale = ours[2].max()
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-6, atol=1e-7 * scale)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-12)


def test_in_memory_ranks_equal_a_direct_svd_of_every_context():
    contexts = awkward_contexts(seed=2)
    ranks = context_ranks(contexts, scaling="none", chunk=6)
    s = np.linalg.svd(contexts.astype(np.float64), compute_uv=False)
    np.testing.assert_array_equal(ranks.rank, (s > ranks.rtol * s[:, :1]).sum(axis=1))
