"""Tolerance rules, confidence bounds, the all-pairs check, the spectral cap and certificates."""

import numpy as np
import pytest
import torch

from memcap.numerics import (
    PairStats,
    clopper_pearson,
    dtype_eps,
    matrix_rank_rtol,
    pair_statistics,
    spectral_cap,
    upper_confidence_bound,
)
from memcap.numerics.certificates import certificates
from memcap.numerics.tolerance import EPS64, gram_resolves


def test_tolerance_is_numpys_matrix_rank_rule():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 12)).astype(np.float32)
    s = np.linalg.svd(x, compute_uv=False)
    tol = s[0] * matrix_rank_rtol(5, 12, x.dtype)
    assert np.linalg.matrix_rank(x) == int((s > tol).sum())
    assert matrix_rank_rtol(5, 12, np.float32) == 12 * np.finfo(np.float32).eps
    assert dtype_eps(torch.float16) == torch.finfo(torch.float16).eps
    assert dtype_eps(np.int64) == dtype_eps(torch.int32) == EPS64
    assert gram_resolves(matrix_rank_rtol(768, 768, np.float32), 768 * EPS64)
    assert not gram_resolves(matrix_rank_rtol(768, 768, np.float64), 768 * EPS64)


def test_confidence_bounds():
    level = 0.95
    assert upper_confidence_bound(0, 500, level) == pytest.approx(1 - 0.05 ** (1 / 500))
    assert upper_confidence_bound(7, 7) == 1.0
    lo, hi = clopper_pearson(0, 10, level)
    assert lo == 0.0 and hi == pytest.approx(1 - 0.025 ** (1 / 10))
    lo, hi = clopper_pearson(10, 10, level)
    assert hi == 1.0 and lo == pytest.approx(0.025 ** (1 / 10))
    lo, hi = clopper_pearson(30, 100, level)
    assert lo < 0.3 < hi
    assert clopper_pearson(0, 0) == (0.0, 1.0)


def test_pair_statistics_counts_each_kind():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 6))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    x[1] = x[0]  # duplicate
    x[2] = -3.0 * x[0]  # dependent, not a duplicate
    x[3] = x[4] + 0.02 * rng.standard_normal(6)  # near-duplicate, independent
    x[5] = 0.0
    stats = pair_statistics(torch.from_numpy(x), tau=1e-6, cosine=0.99)
    assert stats == PairStats(
        zero_rows=1,
        duplicate_pairs=1,
        dependent_pairs=3,  # (0, 1), (0, 2), (1, 2)
        near_duplicate_pairs=4,
        example=(0, 1),
    )
    # A tolerance below what the 2 × 2 Gram matrix resolves: candidates re-checked by SVD.
    exact = pair_statistics(torch.from_numpy(x), tau=1e-9, cosine=0.99)
    assert exact.dependent_pairs == 3


def test_spectral_cap_of_a_low_rank_set():
    rng = np.random.default_rng(2)
    x = torch.from_numpy(rng.standard_normal((30, 5)) @ rng.standard_normal((5, 12)))
    _, s, vh = torch.linalg.svd(x, full_matrices=False)
    assert spectral_cap(x, s, vh, tau=1e-6) == 5  # every 6-subset is dependent
    g = torch.from_numpy(rng.standard_normal((30, 12)))
    _, s, vh = torch.linalg.svd(g, full_matrices=False)
    assert spectral_cap(g, s, vh, tau=1e-6) == 12


def test_certificates_from_each_source():
    rng = np.random.default_rng(3)
    x = torch.from_numpy(rng.standard_normal((6, 4)))
    x[2] = 0.0
    x[4] = 2.0 * x[0]
    pairs = pair_statistics(x, tau=1e-9, cosine=0.999)
    certs = certificates(x, pairs, cap=3, kmax=4, witness=[0, 1, 4], tau=1e-9)
    kinds = {c.kind: c for c in certs}
    assert kinds["zero_vector"].indices == (2,) and kinds["zero_vector"].size == 1
    assert kinds["dependent_pair"].indices == (0, 4) and kinds["dependent_pair"].size == 2
    assert kinds["spectral"].size == 4 and kinds["spectral"].indices == ()
    assert kinds["sampled_subset"].verified and kinds["sampled_subset"].size == 3
    # A witness that a direct SVD finds independent is kept but not trusted.
    (sampled,) = certificates(x, _no_pairs(), cap=4, kmax=4, witness=[0, 1, 3], tau=1e-9)
    assert sampled.kind == "sampled_subset" and not sampled.verified
    assert sampled.size == 3


def _no_pairs() -> PairStats:
    return PairStats(0, 0, 0, 0, None)
