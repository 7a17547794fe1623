"""Verdicts on Assumptions 1, 2, general position and Theorem 1, from fabricated evidence."""

import math
from dataclasses import replace

import pytest

from memcap.report.verdicts import (
    MIN_SUBSETS,
    LayerEvidence,
    Verdict,
    context_rank_check,
    general_position_check,
    kruskal_check,
    largest_supported_n,
    layer_verdicts,
)

GOOD = LayerEvidence(
    model="vit",
    layer="0",
    T=200,
    n=16,
    d=64,
    samples=200,
    context_full_rank_frac=1.0,
    kruskal_p_n=1.0,
    general_position_p_d=1.0,
    kruskal_rank_estimate=64,
    contexts_checked=200,
    worst_margin=5.0,
    profile={2: 1.0, 8: 1.0, 16: 1.0, 64: 1.0},
)


def test_all_assumptions_hold_so_theorem_applies_at_n():
    v = layer_verdicts(GOOD)
    assert [v.contexts.verdict, v.kruskal.verdict, v.general_position.verdict] == [Verdict.PASS] * 3
    assert v.theorem.verdict is Verdict.PASS
    assert v.theorem.n_applicable == 16
    assert v.theorem.bound(4) == 4 * 15 + 1
    assert "1.5%" in v.kruskal.reason  # rule of three: 3/200


def test_n_larger_than_d_fails_both_assumptions_without_data():
    ev = replace(GOOD, n=80, d=64, context_full_rank_frac=math.nan, kruskal_p_n=math.nan)
    v = layer_verdicts(ev)
    assert v.contexts.verdict is Verdict.FAIL
    assert v.kruskal.verdict is Verdict.FAIL
    assert v.theorem.verdict is Verdict.FAIL
    assert v.theorem.n_applicable is None
    assert v.theorem.bound(3) is None
    assert "n = 80 > d = 64" in v.contexts.evidence


def test_one_rank_deficient_context_fails_assumption_2():
    check = context_rank_check(replace(GOOD, context_full_rank_frac=0.995))
    assert check.verdict is Verdict.FAIL
    assert "99.5%" in check.evidence


def test_borderline_margin_is_inconclusive_not_pass():
    check = context_rank_check(replace(GOOD, worst_margin=0.3))
    assert check.verdict is Verdict.INCONCLUSIVE
    assert context_rank_check(replace(GOOD, worst_margin=None)).verdict is Verdict.PASS


def test_missing_measurements_are_inconclusive():
    ev = replace(GOOD, context_full_rank_frac=math.nan, kruskal_p_n=math.nan)
    assert context_rank_check(ev).verdict is Verdict.INCONCLUSIVE
    assert kruskal_check(ev).verdict is Verdict.INCONCLUSIVE
    assert layer_verdicts(ev).theorem.verdict is Verdict.INCONCLUSIVE


def test_too_few_subsets_cannot_pass():
    ev = replace(GOOD, samples=MIN_SUBSETS - 1)
    assert kruskal_check(ev).verdict is Verdict.INCONCLUSIVE
    assert layer_verdicts(ev).theorem.verdict is Verdict.INCONCLUSIVE
    # ... but a dependent subset found among few draws is still proof of failure.
    assert kruskal_check(replace(ev, kruskal_p_n=0.5)).verdict is Verdict.FAIL


def test_dependent_subset_fails_and_profile_gives_reduced_n():
    ev = replace(
        GOOD,
        kruskal_p_n=0.9,
        kruskal_rank_estimate=8,
        profile={2: 1.0, 4: 1.0, 8: 1.0, 12: 0.97, 16: 0.9},
    )
    v = layer_verdicts(ev)
    assert v.kruskal.verdict is Verdict.FAIL
    assert v.theorem.verdict is Verdict.FAIL
    assert v.theorem.n_applicable == 8
    assert v.theorem.bound(10) == 10 * 7 + 1
    assert "cut to 8 tokens" in v.theorem.text


def test_reduced_n_needs_full_rank_contexts():
    ev = replace(GOOD, kruskal_p_n=0.9, context_full_rank_frac=1.0, worst_margin=0.1)
    v = layer_verdicts(ev)
    assert v.contexts.verdict is Verdict.INCONCLUSIVE
    assert v.theorem.verdict is Verdict.FAIL
    assert v.theorem.n_applicable is None


def test_largest_supported_n_ignores_k_above_n_and_d():
    ev = replace(GOOD, n=16, d=64, profile={2: 1.0, 10: 1.0, 20: 1.0, 70: 1.0})
    assert largest_supported_n(ev) == 10
    assert largest_supported_n(replace(ev, profile={})) is None


@pytest.mark.parametrize(
    ("T", "p_d", "expected"),
    [(200, 1.0, Verdict.PASS), (200, 0.2, Verdict.FAIL), (40, 1.0, Verdict.INCONCLUSIVE)],
)
def test_general_position(T, p_d, expected):
    check = general_position_check(replace(GOOD, T=T, general_position_p_d=p_d))
    assert check.verdict is expected


def test_general_position_failure_does_not_block_theorem_1():
    v = layer_verdicts(replace(GOOD, general_position_p_d=0.0, kruskal_rank_estimate=20))
    assert v.general_position.verdict is Verdict.FAIL
    assert v.theorem.verdict is Verdict.PASS


def test_certified_upper_bound_fails_even_when_sampling_saw_no_dependence():
    ev = replace(GOOD, rank_upper_bound=1, certificate="dependent_pair", duplicate_pairs=45)
    check = kruskal_check(ev)
    assert check.verdict is Verdict.FAIL
    assert "certified Kruskal rank ≤ 1 (dependent pair)" in check.evidence
    assert "45 pairs of identical queries" in check.evidence
    # A dependent pair rules out every k >= 2, so no reduced context size is offered either.
    assert largest_supported_n(ev) is None
    assert layer_verdicts(ev).theorem.n_applicable is None


def test_stage_dependent_fraction_bound_is_quoted_on_pass():
    check = kruskal_check(replace(GOOD, dependent_bounds={16: 0.0149}))
    assert check.verdict is Verdict.PASS
    assert "≤ 1.5% of 16-subsets dependent (upper confidence bound)" in check.reason


def test_reduced_n_is_capped_by_the_kruskal_estimate():
    ev = replace(GOOD, kruskal_p_n=0.8, kruskal_rank_estimate=4, profile={2: 1.0, 4: 1.0, 8: 1.0})
    assert largest_supported_n(ev) == 4
