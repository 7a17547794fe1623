"""Certified capacity rank(Z): random and given attention, own and shared contexts, saturation."""

import numpy as np
import pytest
import torch

from memcap.capacity.certified import (
    certified_capacity_curve,
    certified_capacity_from_attention,
    input_precision,
    numerical_rank,
    own_context_features,
    random_attention_weights,
    saturation,
    shared_context_spectra,
)
from memcap.theory import theory_bound


def certified_capacity(queries, contexts, H: int, d_h: int, seed: int = 0) -> int:
    """Certified capacity for one head count H (rank(Z), random attention)."""
    return certified_capacity_curve(queries, contexts, [H], d_h, seed)[0].rank


def _shared(T: int, n: int, d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    context = rng.random((n, d))
    return rng.random((T, d)), np.broadcast_to(context, (T, n, d))


@pytest.mark.parametrize(("H", "n", "d", "d_h"), [(1, 4, 8, 4), (3, 4, 8, 6), (4, 6, 10, 6)])
def test_shared_context_reaches_exactly_the_bound_when_head_dim_covers_n(H, n, d, d_h):
    bound = theory_bound(H, n)
    queries, contexts = _shared(bound + 15, n, d)
    assert certified_capacity(queries, contexts, H, d_h, seed=1) == bound


@pytest.mark.parametrize("d_h", [1, 2, 5, 12])
def test_shared_context_never_exceeds_the_bound(d_h):
    queries, contexts = _shared(60, 5, 12, seed=3)
    for H in (1, 2, 5, 9):
        assert certified_capacity(queries, contexts, H, d_h, seed=2) <= theory_bound(H, 5)


def test_random_contexts_fill_every_column_or_example():
    rng = np.random.default_rng(5)
    queries, contexts = rng.random((40, 6)), rng.random((40, 4, 6))
    assert certified_capacity(queries, contexts, 2, 4) == 12  # H·d < T
    assert certified_capacity(queries[:9], contexts[:9], 2, 4) == 9  # T < H·d


def test_curve_nests_heads_and_matches_single_calls():
    queries, contexts = _shared(40, 4, 8, seed=7)
    curve = certified_capacity_curve(queries, contexts, [1, 2, 3, 5], d_h=4, seed=9)
    singles = [certified_capacity(queries, contexts, h, 4, seed=9) for h in (1, 2, 3, 5)]
    assert [r.rank for r in curve] == singles == [4, 7, 10, 16]
    assert all(0 < r.last_kept <= 1 and r.first_dropped < 1e-10 for r in curve)


def test_given_one_hot_attention_certifies_the_tokens_it_reaches():
    n, d, T = 5, 8, 20
    context = torch.rand(n, d, dtype=torch.float64).expand(T, n, d)
    one_hot = torch.nn.functional.one_hot(torch.arange(T) % 3, n).double()[:, None]
    assert certified_capacity_from_attention(one_hot, context) == 3
    uniform = torch.full((T, 2, n), 1.0 / n, dtype=torch.float64)
    assert certified_capacity_from_attention(uniform, context) == 1


def test_numerical_rank_reports_its_edge():
    matrix = torch.diag(torch.tensor([1.0, 1e-3, 1e-20], dtype=torch.float64))
    rank = numerical_rank(matrix)
    assert rank.rank == 2
    assert rank.last_kept == pytest.approx(1e-3)
    assert rank.first_dropped == pytest.approx(1e-20)
    assert numerical_rank(torch.zeros(3, 4)).rank == 0
    rounded = torch.diag(torch.tensor([1.0, 1e-3, 1e-9], dtype=torch.float64))
    assert numerical_rank(rounded).rank == 3
    assert numerical_rank(rounded, input_eps=input_precision(np.zeros(1, np.float32))).rank == 2


def test_saturation_counts_examples_with_a_near_one_hot_weight():
    head0 = [[1.0, 0.0, 0.0], [0.995, 0.005, 0.0], [0.5, 0.5, 0.0], [0.2, 0.3, 0.5]]
    head1 = [[1 / 3] * 3] * 4
    attention = torch.tensor([head0, head1]).transpose(0, 1)  # (T=4, H=2, n=3)
    values = saturation(attention, 0.99)
    torch.testing.assert_close(values, torch.tensor([0.5, 0.0], dtype=torch.float64))
    random = torch.softmax(10 * torch.randn(50, 4, 6), -1)
    assert ((saturation(random) >= 0) & (saturation(random) <= 1)).all()
    with pytest.raises(ValueError, match="at least 0.5"):
        saturation(attention, 0.3)


def _direct_spectrum(queries, context, H, d_h, seed):
    """Z itself with every example's context set to ``context``: its singular values / σ_max."""
    contexts = np.broadcast_to(context, (len(queries), *context.shape))
    features = own_context_features(queries, contexts, H, d_h, seed)
    z = features.reshape(len(queries), -1).numpy()
    values = np.linalg.svd(z, compute_uv=False)
    return values / values[0]


@pytest.mark.parametrize("repeat", [1, 3])
def test_shared_spectra_are_those_of_z_itself_tall_and_wide(repeat):
    # n = 4, d = 9: W has H·4 columns; with 30 distinct queries H = 1..7 are tall, 8..9 wide.
    # Repeated queries (the same example three times) leave one scaled row each.
    rng = np.random.default_rng(11)
    queries = np.repeat(rng.standard_normal((30, 9)), repeat, axis=0)
    context = rng.standard_normal((4, 9))
    H_values = [1, 2, 5, 7, 8, 9]
    weights = random_attention_weights(9, max(H_values), 4, seed=3)
    spectra = shared_context_spectra(queries, context, H_values, weights)
    for h, spectrum in zip(H_values, spectra, strict=True):
        direct = _direct_spectrum(queries, context, h, 4, seed=3)
        assert spectrum.shape == (len(queries), h * 9)
        assert len(spectrum.relative) == min(len(queries), h * 9)  # Z's zeros padded in
        size = min(len(direct), len(spectrum.relative))
        np.testing.assert_allclose(spectrum.relative[:size], direct[:size], atol=1e-12)
        rank = int((spectrum.relative > 1e-10).sum())
        assert rank == min(theory_bound(h, 4), len(queries) // repeat)


def test_identical_queries_give_rank_one_whatever_h():
    rng = np.random.default_rng(12)
    queries = np.repeat(rng.standard_normal((1, 6)), 50, axis=0)
    weights = random_attention_weights(6, 3, 5, seed=0)
    for spectrum in shared_context_spectra(queries, rng.standard_normal((5, 6)), [1, 3], weights):
        assert spectrum.relative[0] == 1.0 and not spectrum.relative[1:].any()
    with pytest.raises(ValueError, match="at most the weights' heads"):
        shared_context_spectra(queries, rng.standard_normal((5, 6)), [4], weights)


def test_own_features_hold_every_heads_block():
    rng = np.random.default_rng(13)
    queries, contexts = rng.random((20, 6)), rng.random((20, 3, 6))
    features = own_context_features(queries, contexts, 4, d_h=3, seed=5)
    assert tuple(features.shape) == (20, 4, 6)
    # the first H of H' heads agree: the block of two heads is the first two of four. The two
    # calls batch the heads' matmuls in different shapes, which BLAS may sum in another order
    # (4.4e-16 apart on AMD EPYC): float64 features of order one, so 1e-13 relative (about
    # 450 ULP) is far below any difference between heads, which are O(0.1) apart
    np.testing.assert_allclose(
        own_context_features(queries, contexts, 2, 3, seed=5).numpy(),
        features[:, :2].numpy(),
        rtol=1e-13,
        atol=1e-15,
    )
    assert np.abs(features[:, 0] - features[:, 1]).max() > 1e-3  # the heads differ
    with pytest.raises(ValueError, match="max_H"):
        own_context_features(queries, contexts, 0, 3)
