"""Certified capacity rank(Z), saturation and the real-data capacity table."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from memcap.capacity.ceiling import at_ceiling, ceiling, ceiling_reading, shared_reading
from memcap.capacity.certified import (
    certified_capacity_curve,
    certified_capacity_from_attention,
    input_precision,
    numerical_rank,
    saturation,
)
from memcap.capacity.real import real_capacity_rows, subsample
from memcap.capacity.settings import certify_memory_mb
from memcap.capacity.summary import LEADING_COLUMNS, summarize
from memcap.theory import theory_bound


def certified_capacity(queries, contexts, n_heads: int, head_dim: int, seed: int = 0) -> int:
    """Certified capacity for one head count H (rank(Z), random attention)."""
    return certified_capacity_curve(queries, contexts, [n_heads], head_dim, seed)[0].rank


def _shared(examples: int, n: int, d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    context = rng.random((n, d))
    return rng.random((examples, d)), np.broadcast_to(context, (examples, n, d))


@pytest.mark.parametrize(
    ("heads", "n", "d", "head_dim"), [(1, 4, 8, 4), (3, 4, 8, 6), (4, 6, 10, 6)]
)
def test_shared_context_reaches_exactly_the_bound_when_head_dim_covers_n(heads, n, d, head_dim):
    bound = theory_bound(heads, n)
    queries, contexts = _shared(bound + 15, n, d)
    assert certified_capacity(queries, contexts, heads, head_dim, seed=1) == bound


@pytest.mark.parametrize("head_dim", [1, 2, 5, 12])
def test_shared_context_never_exceeds_the_bound(head_dim):
    queries, contexts = _shared(60, 5, 12, seed=3)
    for heads in (1, 2, 5, 9):
        assert certified_capacity(queries, contexts, heads, head_dim, seed=2) <= theory_bound(
            heads, 5
        )


def test_random_contexts_fill_every_column_or_example():
    rng = np.random.default_rng(5)
    queries, contexts = rng.random((40, 6)), rng.random((40, 4, 6))
    assert certified_capacity(queries, contexts, 2, 4) == 12  # H·d < T
    assert certified_capacity(queries[:9], contexts[:9], 2, 4) == 9  # T < H·d


def test_curve_nests_heads_and_matches_single_calls():
    queries, contexts = _shared(40, 4, 8, seed=7)
    curve = certified_capacity_curve(queries, contexts, [1, 2, 3, 5], head_dim=4, seed=9)
    singles = [certified_capacity(queries, contexts, h, 4, seed=9) for h in (1, 2, 3, 5)]
    assert [r.rank for r in curve] == singles == [4, 7, 10, 16]
    assert all(0 < r.last_kept <= 1 and r.first_dropped < 1e-10 for r in curve)


def test_given_one_hot_attention_certifies_the_tokens_it_reaches():
    n, d, examples = 5, 8, 20
    context = torch.rand(n, d, dtype=torch.float64).expand(examples, n, d)
    one_hot = torch.nn.functional.one_hot(torch.arange(examples) % 3, n).double()[:, None]
    assert certified_capacity_from_attention(one_hot, context) == 3
    uniform = torch.full((examples, 2, n), 1.0 / n, dtype=torch.float64)
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


def _own(rows: list[dict]) -> list[dict]:
    """The rows with every example's own context."""
    return [r for r in rows if r["contexts"] == "own"]


def test_real_capacity_rows_follow_the_bound_and_the_ceiling():
    rng = np.random.default_rng(0)
    queries = rng.random((30, 8)).astype(np.float32)
    contexts = np.broadcast_to(rng.random((3, 8)), (30, 3, 8)).astype(np.float32)
    both = real_capacity_rows(
        queries, contexts, max_heads=4, head_dim=None, max_examples=25, seed=1
    )
    rows, shared = _own(both), [r for r in both if r["contexts"] == "shared"]
    # these contexts are shared already: the reduced computation gives the same ranks
    assert [r["certified"] for r in shared] == [r["certified"] for r in rows]
    assert {r["shared_example"] for r in shared} == {subsample(30, 25, 1)[0]}
    assert [r["H"] for r in rows] == [1, 2, 3, 4]
    assert all(r["T"] == 25 and r["T_total"] == 30 and r["d_h"] == 3 for r in rows)
    assert [r["certified"] for r in rows] == [r["bound"] for r in rows] == [3, 5, 7, 9]
    assert all(r["certified"] <= r["ceiling"] for r in rows)
    # a shared context caps the rank at H(n−1)+1, below min(T, H·d): the rows measure the data
    assert [r["ceiling"] for r in rows] == [8, 16, 24, 25]
    assert not any(r["at_ceiling"] for r in rows)
    narrow = _own(real_capacity_rows(queries, contexts, 2, head_dim=2, max_examples=None, seed=1))
    assert all(math.isnan(r["bound"]) for r in narrow)  # Theorem 1 needs d_h >= n


def test_subsample_is_seeded_sorted_and_bounded():
    index = subsample(100, 10, seed=3)
    assert len(index) == 10 and list(index) == sorted(set(index))
    np.testing.assert_array_equal(index, subsample(100, 10, seed=3))
    np.testing.assert_array_equal(subsample(5, 10, seed=3), np.arange(5))


def test_memory_estimate_grows_with_examples_heads_and_context():
    section = {"max_H": 4, "max_T": 256, "d_h": None}
    model = {"data": {"T": 1000}, "n": 16, "family": "bert"}
    small = certify_memory_mb(section, model)
    assert small > certify_memory_mb({**section, "max_T": 128}, model)
    assert certify_memory_mb({**section, "max_H": 8}, model) > small
    assert certify_memory_mb(section, {**model, "n": None}) > small  # BERT: 128 tokens
    assert certify_memory_mb({**section, "max_T": None}, model) > small
    # a config class's declared width beyond the assumed 1,024 (a 7B Llama: 4,096) scales it
    wide = {**model, "model_kwargs": {"hidden_size": 4096}}
    base = certify_memory_mb(section, {**model, "model_kwargs": {"hidden_size": 768}})
    assert base == small
    assert certify_memory_mb(section, wide) - 700 == pytest.approx(4 * (small - 700), abs=4)


def test_summary_puts_the_identifying_columns_first():
    frames = [
        pd.DataFrame(real_capacity_rows(*_shared(12, 3, 4), 2, None, None, seed=0)).assign(
            model=name, layer=0
        )
        for name in ("a", "b")
    ]
    table = summarize(frames)
    assert list(table.columns[: len(LEADING_COLUMNS)]) == LEADING_COLUMNS
    assert table.columns[-1] == "shared_example"  # new columns come after every existing one
    assert len(table) == 8 and table["model"].tolist() == ["a"] * 4 + ["b"] * 4


def test_rows_at_ceiling_are_flagged_and_the_flag_comes_last():
    rng = np.random.default_rng(4)
    queries, contexts = rng.random((20, 4)), rng.random((20, 3, 4))
    rows = _own(real_capacity_rows(queries, contexts, 6, None, None, seed=0))
    assert list(rows[0]) == [
        "H", "certified", "T", "T_total", "n", "d", "d_h", "bound", "ceiling", "last_kept",
        "first_dropped", "at_ceiling", "contexts", "shared_example",
    ]  # fmt: skip
    # random contexts fill min(T, H·d): 4, 8, 12, 16, then T = 20
    assert [r["certified"] for r in rows] == [r["ceiling"] for r in rows] == [4, 8, 12, 16, 20, 20]
    assert all(r["at_ceiling"] for r in rows)


def test_repeated_examples_keep_the_rank_below_its_ceiling():
    rng = np.random.default_rng(6)
    queries, contexts = rng.random((10, 6)), rng.random((10, 3, 6))
    twice = _own(real_capacity_rows(
        np.concatenate([queries, queries]), np.concatenate([contexts, contexts]), 4, None, None, 0
    ))  # fmt: skip
    # identical examples give identical rows of Z: rank 10 where T = 20 ≤ H·d
    assert [r["certified"] for r in twice] == [6, 10, 10, 10]
    assert [r["at_ceiling"] for r in twice] == [True, False, False, False]


def _layer_norm(examples: int, n: int, d: int, affine: bool):
    """float32 contexts and queries like a LayerNorm's output: every token on one hyperplane."""
    rng = np.random.default_rng(8)
    tokens = rng.standard_normal((examples, n + 1, d)).astype(np.float32)
    tokens = (tokens - tokens.mean(-1, keepdims=True)) / tokens.std(-1, keepdims=True)
    if affine:  # γ ⊙ z + β: Σ_i x_i / γ_i is the same constant for every token
        tokens = tokens * rng.uniform(0.5, 1.5, d) + rng.standard_normal(d)
    tokens = tokens.astype(np.float32)
    return tokens[:, 0], tokens[:, 1:]


@pytest.mark.parametrize(("affine", "expected"), [(False, [7, 14, 21]), (True, [8, 15, 22])])
def test_layer_norm_hyperplane_keeps_the_rank_below_its_ceiling(affine, expected):
    # E_t u = c·1 for all t (u = 1/γ): every head's block loses a direction, and with c ≠ 0
    # the blocks share one: rank(Z) = H(d−1) without bias, H(d−1)+1 with it, below H·d.
    queries, contexts = _layer_norm(100, 4, 8, affine)
    rows = _own(real_capacity_rows(queries, contexts, 3, None, None, seed=0))
    assert [r["certified"] for r in rows] == expected
    assert [r["ceiling"] for r in rows] == [8, 16, 24]
    assert [r["at_ceiling"] for r in rows] == [affine, False, False]
    # float32 rounding leaves the lost direction at ~1e-8 of σ_max: treated as exact inputs,
    # the rank would count it and sit at the ceiling
    exact = certified_capacity_curve(queries, contexts, [1, 2, 3], 4, seed=0)
    assert [r.rank for r in exact] == [8, 16, 24]
    assert all(r["first_dropped"] < 1e-6 < r["last_kept"] for r in rows[1:])


def test_a_shared_context_binds_the_capacity_at_h_n_minus_1_plus_1():
    # own contexts fill min(T, H·d); one shared context stops at min(T, H(n−1)+1) < H·d
    rng = np.random.default_rng(9)
    queries, contexts = rng.standard_normal((120, 16)), rng.standard_normal((120, 5, 16))
    rows = real_capacity_rows(queries, contexts, 4, None, None, seed=0)
    own, shared = _own(rows), [r for r in rows if r["contexts"] == "shared"]
    assert [r["certified"] for r in own] == [16, 32, 48, 64]
    assert [r["certified"] for r in shared] == [5, 9, 13, 17]  # H·4 + 1
    assert all(not r["at_ceiling"] for r in shared)
    # the reduction through E = L·Qᵀ gives the rank of Z itself
    direct = certified_capacity_curve(
        queries, np.broadcast_to(contexts[0], contexts.shape), [1, 2, 3, 4], 5, seed=0
    )
    assert [r.rank for r in direct] == [r["certified"] for r in shared]
    assert shared_reading(13, 120, 3, 5).startswith("reaches min(T, H(n−1)+1) = 13")
    assert shared_reading(12, 120, 3, 5).startswith("below min(T, H(n−1)+1) = 13")
    assert shared_reading(120, 120, 40, 5).startswith("reaches min(T, H(n−1)+1) = 120")


def test_ceiling_reading_says_what_a_rank_at_its_ceiling_reports():
    assert ceiling(100, 2, 30) == 60 and ceiling(50, 2, 30) == 50
    assert at_ceiling(60, 100, 2, 30) and not at_ceiling(59, 100, 2, 30)
    assert ceiling_reading(50, 50, 2, 30) == "at ceiling: needs T > H·d to say more"
    assert ceiling_reading(60, 60, 2, 30) == "at ceiling: needs T > H·d to say more"  # T = H·d
    full = ceiling_reading(60, 100, 2, 30)
    assert full.startswith("at ceiling: Z has full column rank H·d = 60")
    assert "the readout's limit, not a property of the data" in full
    assert ceiling_reading(41, 100, 2, 30) == (
        "below its ceiling 60: a measurement of the embeddings"
    )
