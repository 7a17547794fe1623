"""The capacity stage's rows on embeddings: own and shared contexts, draws, the floor, caps."""

import math

import numpy as np
import pytest

from memcap.capacity.ceiling import AT_CEILING, NOT_RESOLVED
from memcap.capacity.certified import certified_capacity_curve
from memcap.capacity.real import draw_seeds, real_capacity_rows, shared_positions, subsample
from memcap.capacity.settings import certify_memory_mb


def _own(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["contexts"] == "own"]


def _first_shared(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["shared_context"] == 0 and r["draw"] == 0]


def test_rows_follow_the_bound_and_the_ceiling_and_cap_the_bound_at_t():
    rng = np.random.default_rng(0)
    queries = rng.random((30, 8)).astype(np.float32)
    contexts = np.broadcast_to(rng.random((3, 8)), (30, 3, 8)).astype(np.float32)
    both = real_capacity_rows(queries, contexts, max_H=4, d_h=None, max_T=25,
                              seed=1)  # fmt: skip
    rows, shared = _own(both), _first_shared(both)
    # these contexts are shared already: the reduced computation gives the same ranks
    assert [r["certified"] for r in shared] == [r["certified"] for r in rows]
    assert {r["shared_example"] for r in shared} == {subsample(30, 25, 1)[0]}
    assert [r["H"] for r in rows] == [1, 2, 3, 4]
    assert all(r["T"] == 25 and r["T_total"] == 30 and r["d_h"] == 3 for r in rows)
    assert [r["certified"] for r in rows] == [r["bound"] for r in rows] == [3, 5, 7, 9]
    assert [r["ceiling"] for r in rows] == [8, 16, 24, 25]
    assert not any(r["at_ceiling"] for r in rows)
    narrow = _own(real_capacity_rows(queries, contexts, 2, d_h=2, max_T=None, seed=1))
    assert all(math.isnan(r["bound"]) for r in narrow)  # Theorem 1 needs d_h >= n
    # H(n−1)+1 beyond T: what the theorem grants on these examples is T
    few = real_capacity_rows(queries[:6], contexts[:6], 4, None, None, seed=1)
    assert [r["bound"] for r in _own(few)] == [3, 5, 6, 6]


def test_no_rank_exceeds_what_is_possible():
    rng = np.random.default_rng(14)
    queries, contexts = rng.standard_normal((40, 10)), rng.standard_normal((40, 4, 10))
    rows = real_capacity_rows(queries, contexts, 12, None, None, seed=2, draws=2,
                              shared_contexts=3)  # fmt: skip
    for r in rows:
        assert r["rank_low"] <= r["certified"] == r["rank_high"] <= r["ceiling"] <= r["T"]
        assert r["bound"] <= r["T"]
        if r["contexts"] == "shared":
            assert r["certified"] <= min(r["T"], r["H"] * (r["n"] - 1) + 1)
        if r["certified"] >= r["ceiling"]:
            assert r["reading"] == AT_CEILING


def test_shared_contexts_and_draws_take_the_spread_heads_after_the_first():
    rng = np.random.default_rng(15)
    queries, contexts = rng.random((50, 6)), rng.random((50, 4, 6))
    rows = real_capacity_rows(queries, contexts, 4, None, None, seed=3, draws=3,
                              shared_contexts=2, spread_H=[1, 4, 9])  # fmt: skip
    shared = [r for r in rows if r["contexts"] == "shared"]
    runs = {(r["shared_context"], r["draw"]): [] for r in shared}
    for r in shared:
        runs[(r["shared_context"], r["draw"])].append(r["H"])
    assert runs.pop((0, 0)) == [1, 2, 3, 4]  # the first run takes every H
    assert len(runs) == 5 and all(h == [1, 4] for h in runs.values())
    # spread heads beyond max_H leave the first run alone
    alone = real_capacity_rows(queries, contexts, 2, None, None, 3, 2, 2, spread_H=[4])
    assert {(r["shared_context"], r["draw"]) for r in alone if r["contexts"] == "shared"} == {
        (0, 0)
    }
    shared_examples = {r["shared_context"]: r["shared_example"] for r in shared}
    assert shared_examples[0] == 0 and shared_examples[1] != 0
    assert {r["draw"] for r in _own(rows)} == {0}
    # a draw is a different attention: the spectra differ, the bound does not
    h4 = {r["draw"]: r for r in shared if r["shared_context"] == 0 and r["H"] == 4}
    assert h4[0]["last_kept"] != h4[1]["last_kept"]


def test_seeds_and_shared_positions_derive_from_the_run_seed():
    assert draw_seeds(0, 3) == draw_seeds(0, 3) and len(set(draw_seeds(0, 3))) == 3
    assert draw_seeds(0, 2) != draw_seeds(1, 2)
    positions = shared_positions(10, 4, seed=0)
    assert positions[0] == 0 and len(set(positions)) == 4 and max(positions) < 10
    assert shared_positions(3, 5, seed=0)[0] == 0 and len(shared_positions(3, 5, seed=0)) == 3


def test_the_measured_forward_error_raises_the_floor():
    # float32 inputs: rounding alone keeps the 13 directions of H = 3 with a wide gap; with a
    # measured δ = 1e-2 (floor 2δ‖Z‖_F) two of them sit below the floor and the rest of the
    # spectrum has no decade gap there
    rng = np.random.default_rng(17)
    queries = rng.standard_normal((60, 8)).astype(np.float32)
    contexts = np.broadcast_to(rng.standard_normal((5, 8)), (60, 5, 8)).astype(np.float32)
    plain = _first_shared(real_capacity_rows(queries, contexts, 3, None, None, seed=0))
    noisy = _first_shared(real_capacity_rows(queries, contexts, 3, None, None, 0, delta=1e-2))
    assert all(
        r["delta"] == 1e-2 and math.isnan(p["delta"]) for r, p in zip(noisy, plain, strict=True)
    )
    assert all(r["floor"] > 1e4 * p["floor"] for r, p in zip(noisy, plain, strict=True))
    assert [p["certified"] for p in plain] == [5, 9, 13] and all(p["resolved"] for p in plain)
    assert [r["certified"] for r in noisy] == [5, 9, 11]
    assert [r["resolved"] for r in noisy] == [True, True, False]
    assert noisy[2]["reading"] == f"≥ 11 certified, at most min(T, H(n−1)+1) = 13: {NOT_RESOLVED}"


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


def test_rows_at_ceiling_are_flagged_and_read_as_such():
    rng = np.random.default_rng(4)
    queries, contexts = rng.random((20, 4)), rng.random((20, 3, 4))
    rows = _own(real_capacity_rows(queries, contexts, 6, None, None, seed=0))
    assert list(rows[0])[:14] == [
        "H", "certified", "T", "T_total", "n", "d", "d_h", "bound", "ceiling", "last_kept",
        "first_dropped", "at_ceiling", "contexts", "shared_example",
    ]  # fmt: skip
    # random contexts fill min(T, H·d): 4, 8, 12, 16, then T = 20 (from then on by nesting)
    assert [r["certified"] for r in rows] == [r["ceiling"] for r in rows] == [4, 8, 12, 16, 20, 20]
    assert all(r["at_ceiling"] and r["reading"] == AT_CEILING for r in rows)
    assert math.isnan(rows[-1]["last_kept"]) and not math.isnan(rows[-2]["last_kept"])


def test_repeated_examples_keep_the_rank_below_its_ceiling():
    rng = np.random.default_rng(6)
    queries, contexts = rng.random((10, 6)), rng.random((10, 3, 6))
    twice = _own(real_capacity_rows(
        np.concatenate([queries, queries]), np.concatenate([contexts, contexts]), 4, None, None, 0
    ))  # fmt: skip
    # identical examples give identical rows of Z: rank 10 where T = 20 ≤ H·d
    assert [r["certified"] for r in twice] == [6, 10, 10, 10]
    assert [r["at_ceiling"] for r in twice] == [True, False, False, False]
    assert all(r["resolved"] for r in twice)
    assert twice[1]["reading"].startswith("10 below its ceiling min(T, H·d) = 12, resolved")


def _layer_norm(T: int, n: int, d: int, affine: bool):
    """float32 contexts and queries like a LayerNorm's output: every token on one hyperplane."""
    rng = np.random.default_rng(8)
    tokens = rng.standard_normal((T, n + 1, d)).astype(np.float32)
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
    # float32 rounding leaves the lost direction at ~1e-8 of σ_max, below the floor: treated
    # as exact inputs, the rank would count it and sit at the ceiling
    exact = certified_capacity_curve(queries, contexts, [1, 2, 3], 4, seed=draw_seeds(0, 1)[0])
    assert [r.rank for r in exact] == [8, 16, 24]
    assert all(r["first_dropped"] < r["floor"] < r["last_kept"] for r in rows[1:])
    assert all(r["resolved"] and r["gap_decades"] > 2 for r in rows[1:])


def test_a_shared_context_binds_the_capacity_at_h_n_minus_1_plus_1():
    # own contexts fill min(T, H·d); one shared context stops at min(T, H(n−1)+1) < H·d
    rng = np.random.default_rng(9)
    queries, contexts = rng.standard_normal((120, 16)), rng.standard_normal((120, 5, 16))
    rows = real_capacity_rows(queries, contexts, 4, None, None, seed=0)
    own, shared = _own(rows), _first_shared(rows)
    assert [r["certified"] for r in own] == [16, 32, 48, 64]
    assert [r["certified"] for r in shared] == [5, 9, 13, 17]  # H·4 + 1
    assert all(not r["at_ceiling"] and r["resolved"] for r in shared)
    assert all("certified: fixed attention's most" in r["reading"] for r in shared)
    assert not any("tight" in r["reading"] for r in shared)
    # the reduction through E = L·Qᵀ gives the rank of Z itself
    direct = certified_capacity_curve(queries, np.broadcast_to(contexts[0], contexts.shape),
                                      [1, 2, 3, 4], 5, seed=draw_seeds(0, 1)[0])  # fmt: skip
    assert [r.rank for r in direct] == [r["certified"] for r in shared]


def test_a_shared_context_with_repeated_rows_binds_the_capacity_at_h_m_minus_1_plus_1():
    # paper A's Assumption 2 fails on a context with m < n distinct rows (a token repeated at
    # layer 0 of a model whose positions enter inside attention): rank(Z) ≤ H(m−1)+1, reached
    rng = np.random.default_rng(9)
    queries, contexts = rng.standard_normal((120, 16)), rng.standard_normal((120, 5, 16))
    contexts[0, 3:] = contexts[0, :2]  # 3 distinct rows of n = 5
    cause = "positions enter inside attention, as a relative bias: a repeated token ..."
    rows = real_capacity_rows(queries, contexts, 4, None, None, seed=0, repeat_cause=cause)
    shared = _first_shared(rows)
    assert [r["shared_distinct_rows"] for r in shared] == [3] * 4
    assert [r["certified"] for r in shared] == [3, 5, 7, 9]  # H·2 + 1, not H·4 + 1
    assert [r["distinct_bound"] for r in shared] == [3, 5, 7, 9]
    assert all(r["resolved"] for r in shared)
    assert all(
        r["reading"].startswith(f"the shared context has 3 distinct rows of n = 5 ({cause})")
        and "Assumption 2 fails on it" in r["reading"]
        for r in shared
    )
    own = _own(rows)
    assert all(r["shared_distinct_rows"] == -1 and math.isnan(r["distinct_bound"]) for r in own)
    clean = _first_shared(real_capacity_rows(queries[1:], contexts[1:], 2, None, None, seed=0))
    assert all(r["shared_distinct_rows"] == 5 and "distinct" not in r["reading"] for r in clean)
