"""Outcomes of Assumptions 1, 2, general position and Theorem 1, from fabricated evidence."""

import math
from dataclasses import replace

import pandas as pd

from memcap.assumptions.evidence import evidence_from_row
from memcap.assumptions.verdicts import (
    MIN_SUBSETS,
    LayerEvidence,
    Outcome,
    context_rank_check,
    general_position_check,
    kruskal_check,
    largest_supported_n,
    layer_verdicts,
    verdict_columns,
    verdicts_from_columns,
)

APPLIES, FAILS, CLOSE = Outcome.APPLIES, Outcome.DOES_NOT_APPLY, Outcome.TOO_CLOSE

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
    median_margin=6.0,
    context_outcome=APPLIES,
    context_counts={"applies": 200},
    kruskal_outcome_n=APPLIES,
    general_position_outcome_d=APPLIES,
    band={"p_n_strict": 1.0, "p_n_loose": 1.0, "estimate_strict": 60, "estimate_loose": 64},
    profile={2: 1.0, 8: 1.0, 16: 1.0, 64: 1.0},
    applies_examples=200,
    query_error=1e-7,
    context_error=2e-7,
    context_worst_error_margin=4.0,
    decisions={
        "n": {
            "reading": "as independent as random data",
            "samples": 200,
            "zero": 0,
            "null_zero": 0,
            "clear": 200,
            "worst_margin": 5.0,
        },
        "d": {
            "reading": "as independent as random data",
            "samples": 200,
            "zero": 1,
            "null_zero": 2,
            "clear": 180,
            "worst_margin": -0.2,
        },
    },  # fmt: skip
)


def test_both_assumptions_apply_so_theorem_applies_at_n():
    v = layer_verdicts(GOOD)
    assert [v.contexts.outcome, v.kruskal.outcome, v.general_position.outcome] == [APPLIES] * 3
    assert v.theorem.outcome is APPLIES
    assert v.theorem.n_applicable == 16
    assert v.theorem.bound(4) == 4 * 15 + 1
    assert "1.5%" in v.kruskal.reason  # rule of three: 3/200
    assert "clears the measured error" in v.kruskal.reason
    assert "×10 τ 1.000" in v.kruskal.evidence and "Kruskal rank at τ ≈ 64" in v.kruskal.evidence
    # the queries' zero line as the decision draws it; a context's is 2δ
    assert "zero line 2·max(δ/c, δ_aligned) with δ = 1.0e-07" in v.kruskal.evidence
    assert "zero line 2 × 2.0e-07 (measured context error)" in v.contexts.evidence
    # general position: near-singular d-subsets, as many as random data have
    assert "1 of 200 sampled d-subsets" in v.general_position.reason
    assert "as random data's are" in v.general_position.reason
    assert "min(200, H·15 + 1)" in v.theorem.text  # never more than the T examples


def test_the_estimate_at_the_measured_error_stands_beside_taus():
    ev = replace(GOOD, error_estimate=60, error_estimate_clear=40, query_error_aligned=3e-8)
    evidence = kruskal_check(ev).evidence
    assert (
        "Kruskal rank at τ ≈ 64; Kruskal rank at the measured error, sampled: 60 independent "
        in (evidence)
    )
    assert "≥" not in evidence.split("sampled:")[1].split(";")[0]  # an estimate, not a bound
    assert "40 a decade clear of it" in evidence and "δ_aligned = 3.0e-08" in evidence


def test_proves_only_with_an_exact_proof():
    proof = {"proof": "circuit: dependent triple", "proof_size": 3, "reading": "dependent"}
    exact = kruskal_check(
        replace(GOOD, kruskal_outcome_n=FAILS, decisions={"n": proof}, certified_upper=2)
    )
    assert exact.outcome is FAILS and "proves Kruskal rank ≤ 2 < 16" in exact.reason
    assert "certified Kruskal rank ≤ 2" in exact.evidence
    beyond = {"reading": "less independent than random data (by 3.0 decades)", "zero": 40,
              "null_zero": 0, "samples": 200, "clear": 100}  # fmt: skip
    sampled = kruskal_check(replace(GOOD, kruskal_outcome_n=FAILS, decisions={"n": beyond}))
    assert sampled.outcome is FAILS and "proves" not in sampled.reason
    assert "40 of 200 sampled n-subsets" in sampled.reason and "by 3.0 decades" in sampled.reason


def test_no_useful_subset_smaller_than_n():
    ev = replace(GOOD, kruskal_outcome_n=FAILS, applies_examples=1)
    text = layer_verdicts(ev).theorem.text
    assert "No subset of at least n = 16 examples" in text
    assert "apply to 1 of" not in text


def test_n_larger_than_d_does_not_apply_without_data():
    ev = replace(GOOD, n=80, d=64, context_full_rank_frac=math.nan, kruskal_p_n=math.nan)
    v = layer_verdicts(ev)
    assert v.contexts.outcome is FAILS
    assert v.kruskal.outcome is FAILS
    assert v.theorem.outcome is FAILS
    assert v.theorem.n_applicable is None
    assert v.theorem.bound(3) is None
    assert "n = 80 > d = 64" in v.contexts.evidence


def test_contexts_follow_the_stage_outcome_and_show_margins():
    check = context_rank_check(
        replace(GOOD, context_outcome=FAILS, context_counts={"applies": 197, "does not apply": 3})
    )
    assert check.outcome is FAILS
    assert "3 does not apply" in check.evidence and "+5.00 decades" in check.evidence
    close = context_rank_check(replace(GOOD, context_outcome=CLOSE, worst_margin=0.3))
    assert close.outcome is CLOSE and "within 1 decade" in close.reason


def test_missing_measurements_are_not_tested():
    ev = replace(
        GOOD,
        context_full_rank_frac=math.nan,
        context_outcome=None,
        kruskal_p_n=math.nan,
        kruskal_outcome_n=None,
    )
    assert context_rank_check(ev).outcome is Outcome.NOT_TESTED
    assert kruskal_check(ev).outcome is Outcome.NOT_TESTED
    assert layer_verdicts(ev).theorem.outcome is Outcome.NOT_TESTED


def test_a_close_kruskal_band_is_too_close_to_call():
    ev = replace(GOOD, kruskal_outcome_n=CLOSE, band={"p_n_strict": 0.9, "p_n_loose": 1.0})
    v = layer_verdicts(ev)
    assert v.kruskal.outcome is CLOSE
    assert v.theorem.outcome is CLOSE
    assert "Too close to call" in v.theorem.text
    few = kruskal_check(replace(ev, samples=MIN_SUBSETS - 1))
    assert "too few" in few.reason


def test_general_position_fails_on_its_own_outcome():
    decided = {"reading": "less independent than random data", "zero": 30, "null_zero": 1}
    check = general_position_check(
        replace(GOOD, general_position_outcome_d=FAILS, decisions={"d": decided})
    )
    assert check.outcome is FAILS
    assert "d-subset" in check.reason


def test_assumption_1_failing_below_n_gives_a_smaller_applicable_n():
    ev = replace(GOOD, kruskal_outcome_n=FAILS, band={"estimate_strict": 9})
    assert largest_supported_n(ev) == 9
    v = layer_verdicts(ev)
    assert v.theorem.outcome is FAILS
    assert v.theorem.n_applicable == 9
    assert "cut to 9 tokens" in v.theorem.text


def test_the_theorem_names_the_applicable_subset_and_the_structure():
    ev = replace(
        GOOD,
        context_outcome=FAILS,
        applies_examples=197,
        structural="Assumption 2: a rotary-position model adds no position",
    )
    v = layer_verdicts(ev)
    assert "Both assumptions apply to 197 of the 200 examples" in v.theorem.text
    assert "min(197, H·15 + 1)" in v.theorem.text
    assert v.theorem.text.count("by construction") == 1  # once, through the failed check
    assert "cannot hold by construction" in v.contexts.reason


def test_written_columns_read_back_without_deciding_again():
    v = layer_verdicts(replace(GOOD, kruskal_outcome_n=CLOSE))
    row = {"model": "vit", "layer": "0"} | verdict_columns(v)
    back = verdicts_from_columns(GOOD, pd.Series(row).to_dict())
    assert back.kruskal == v.kruskal
    assert back.theorem == v.theorem
    assert back.evidence is GOOD  # the evidence rides along; the outcomes are the stage's


def test_evidence_from_a_summary_row():
    row = {
        "model": "m",
        "layer": "1",
        "T": 10,
        "n": 4,
        "d": 8,
        "samples": 50,
        "context_full_rank_frac": 1.0,
        "kruskal_p_n": 1.0,
        "general_position_p_d": 0.0,
        "kruskal_rank_estimate": 7,
        "context_band_outcome": "applies",
        "contexts_applies": 10,
        "contexts_fails": 0,
        "kruskal_band_outcome_n": "applies",
        "general_position_band_outcome_d": "does not apply",
        "kruskal_p_n_strict": 1.0,
        "paper_a_p_n": 0.5,
        "scaling": "equilibrate",
        "applies_examples": 10,
    }
    ev = evidence_from_row(row)
    assert ev.context_outcome is APPLIES and ev.context_counts == {"applies": 10}
    assert ev.general_position_outcome_d is FAILS
    assert ev.band == {"p_n_strict": 1.0}
    assert ev.paper_a == {"p_n": 0.5}
    assert layer_verdicts(ev).theorem.outcome is APPLIES
