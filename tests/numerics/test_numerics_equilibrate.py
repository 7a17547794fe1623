"""Equilibrated rank decisions: invariant under coordinate and vector scalings, and truly
dependent sets stay dependent (memcap.numerics.equilibrate, kruskal_profile, context_ranks)."""

from pathlib import Path

import numpy as np
import pytest
import torch

from memcap.numerics import balance, context_ranks, kruskal_profile

REAL = Path(__file__).resolve().parents[1] / "data" / "real_embeddings.npz"


def rescaled(x: np.ndarray, seed: int) -> np.ndarray:
    """``x`` with every coordinate times 10^U(-3,3) (common to all vectors) and every vector
    times 10^U(-2,2), stored in float32 as an extraction would store it."""
    rng = np.random.default_rng(seed)
    columns = 10 ** rng.uniform(-3, 3, x.shape[-1])
    rows = 10 ** rng.uniform(-2, 2, x.shape[:-1])
    return (x * columns * rows[..., None]).astype(np.float32)


@pytest.fixture(scope="module")
def real():
    """Stored float32 embeddings of the default run: 200 MiniLM block-3 queries (coordinate 99
    about 390 times the median) and two DINOv2-S/14 block-1 contexts (257 x 384)."""
    with np.load(REAL) as data:
        return data["minilm_l3_queries"], data["dinov2_b1_contexts"]


def outlier_queries(t: int = 120, d: int = 48, seed: int = 0) -> np.ndarray:
    """Independent float32 queries with one massive coordinate and a few high-norm vectors."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((t, d))
    x[:, 5] *= 1e4
    x[:3] *= 300
    return x.astype(np.float32)


def test_balance_gives_unit_rows_and_equal_columns():
    x = torch.from_numpy(outlier_queries())
    result = balance(x)
    assert result.converged
    rows = result.values.norm(dim=1)
    cols = result.values.norm(dim=0)
    torch.testing.assert_close(rows, torch.ones_like(rows), rtol=1e-10, atol=0)
    torch.testing.assert_close(cols, torch.full_like(cols, (120 / 48) ** 0.5), rtol=1e-6, atol=0)


def test_balance_is_the_same_for_any_row_and_column_scaling():
    x = outlier_queries().astype(np.float64)
    first = balance(torch.from_numpy(x)).values
    rng = np.random.default_rng(3)
    scaled = x * 10 ** rng.uniform(-3, 3, x.shape[1]) * 10 ** rng.uniform(-2, 2, (len(x), 1))
    second = balance(torch.from_numpy(scaled)).values
    torch.testing.assert_close(first, second, rtol=1e-9, atol=1e-12)


def test_zero_rows_and_columns_stay_zero():
    x = torch.from_numpy(outlier_queries(t=20, d=8))
    x[4] = 0
    x[:, 2] = 0
    values = balance(x).values
    assert not values[4].any() and not values[:, 2].any()
    assert torch.isfinite(values).all()


def test_each_matrix_on_its_own_equals_the_batch_at_once(real):
    """The CPU balances every matrix on its own (NumPy, to its own convergence); the batched
    torch path (other devices) reaches the same balanced matrices, zero rows included."""
    from memcap.numerics.equilibrate import BALANCE_TOL, MAX_ITERATIONS, _balance_batch

    _, contexts = real
    block = torch.from_numpy(np.concatenate([contexts, rescaled(contexts, 5)]))
    block[1, 7] = 0  # a zero row
    ours = balance(block)
    rows, cols, sweeps, residual = _balance_batch(block.double(), BALANCE_TOL, MAX_ITERATIONS)
    batch = block.double() * rows.unsqueeze(-1) * cols.unsqueeze(-2)
    assert ours.converged and residual <= BALANCE_TOL and ours.iterations <= sweeps
    torch.testing.assert_close(ours.values, batch, rtol=1e-10, atol=0)
    torch.testing.assert_close(ours.rows, rows, rtol=1e-10, atol=0)
    assert not ours.values[1, 7].any()
    single = balance(block[2])  # one (m, d) matrix keeps its shape
    assert single.values.shape == block[2].shape and single.rows.shape == (block.shape[1],)


def test_profile_does_not_change_with_units_on_synthetic_data():
    x = outlier_queries()
    base = kruskal_profile(x, 60, seed=1)
    for seed in range(3):
        other = kruskal_profile(rescaled(x, seed), 60, seed=1)
        np.testing.assert_array_equal(other.p, base.p)
        np.testing.assert_array_equal(other.m, base.m)
        assert (other.estimate, other.upper_bound, other.lower_bound) == (
            base.estimate,
            base.upper_bound,
            base.lower_bound,
        )
        assert [c.kind for c in other.certificates] == [c.kind for c in base.certificates]
    # paper A's raw rule does change: that is what the equilibration removes
    raw = kruskal_profile(rescaled(x, 0), 60, seed=1, scaling="none")
    assert raw.estimate < base.estimate


def test_profile_does_not_change_with_units_on_real_embeddings(real):
    queries, _ = real
    base = kruskal_profile(queries, 50, seed=0)
    assert base.p[64] == 1.0  # the raw rule finds dependent 64-subsets here (coordinate 99)
    assert kruskal_profile(queries, 50, seed=0, scaling="none").p[64] < 1.0
    for seed in range(2):
        other = kruskal_profile(rescaled(queries, seed), 50, seed=0)
        np.testing.assert_array_equal(other.p, base.p)
        assert other.estimate == base.estimate


def test_context_ranks_do_not_change_with_units(real):
    _, contexts = real
    base = context_ranks(contexts)
    assert (base.rank == 257).all() and (base.margin_decades > 1).all()
    for seed in range(2):
        other = context_ranks(rescaled(contexts, seed))
        np.testing.assert_array_equal(other.rank, base.rank)
        np.testing.assert_allclose(other.margin_decades, base.margin_decades, atol=1e-6)
        assert (other.raw.rank < 257).all()  # the raw rule calls them rank-deficient


def test_dependent_sets_stay_dependent():
    x = outlier_queries(t=40, d=24)
    duplicate = np.vstack([x, x[7:8]])
    assert kruskal_profile(duplicate, 20).upper_bound == 1  # a bitwise duplicate pair
    summed = np.vstack([x[:10], (x[0] + x[1])[None]]).astype(np.float32)  # float32 rounding
    assert kruskal_profile(summed, 20).upper_bound <= 10
    zero = np.vstack([x, np.zeros((1, 24), np.float32)])
    assert kruskal_profile(zero, 20).upper_bound == 0


def test_dependent_contexts_stay_dependent_and_are_counted():
    rng = np.random.default_rng(0)
    contexts = (rng.standard_normal((3, 6, 16)) * 10 ** rng.uniform(-3, 3, 16)).astype(np.float32)
    contexts[0, 5] = contexts[0, 2]  # a repeated row
    contexts[1, 4] = 0.0  # a zero row
    contexts[2, 5] = contexts[2, 0] + contexts[2, 1]  # a sum, rounded to float32
    ranks = context_ranks(contexts)
    np.testing.assert_array_equal(ranks.rank, [5, 5, 5])
    np.testing.assert_array_equal(ranks.repeated_rows, [1, 0, 0])
    np.testing.assert_array_equal(ranks.zero_rows, [0, 1, 0])
    assert (ranks.margin_decades < -1).all()
