"""Why a layer fails, per example: mechanisms, structural failures, the applicable subset."""

import numpy as np

from memcap.assumptions import mechanisms
from memcap.assumptions.checks import check_layer
from memcap.assumptions.settings import AssumptionsSettings
from memcap.numerics import Outcome, context_ranks

ROTARY = {"positions": "rotary", "causal": True}
RELATIVE = {"positions": "relative_bias", "causal": False}  # T5's encoder, Swin
ADDITIVE_CAUSAL = {"positions": "additive", "causal": True}


def contexts_with_defects(t: int = 12, n: int = 6, d: int = 16, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    contexts = rng.standard_normal((t, n, d)).astype(np.float32)
    contexts[1, 0] = contexts[1, 1]  # equal leading rows (identical first two tokens)
    contexts[2, 3] = 0.0  # a zero row
    contexts[3] = rng.standard_normal((n, 2)) @ rng.standard_normal((2, d))  # rank 2
    return contexts


def test_context_mechanisms():
    ranks = context_ranks(contexts_with_defects())
    heads = [[5, 6, 7, 8]] * 12
    heads[1] = [9, 9, 3, 4]
    extraction = ADDITIVE_CAUSAL | {"example_tokens_head": heads}
    assert mechanisms.context_mechanism(ranks, 1, extraction, "1") == (
        "repeated rows: identical leading tokens under causal attention",
        "1 repeated rows",
    )
    assert mechanisms.context_mechanism(ranks, 2, extraction, "1")[0] == "zero rows"
    stored = contexts_with_defects()
    assert mechanisms.context_mechanism(ranks, 3, extraction, "1", stored)[0] == (
        "concentrated span"
    )
    shared = stored.copy()
    shared[4] = 100.0 + 0.01 * shared[4]  # every token ≈ one vector
    name, detail = mechanisms.span_mechanism(shared[4].astype(np.float64), "x")
    assert name == "shared token component" and "the mean token holds" in detail
    unstored = mechanisms.context_mechanism(ranks, 3, extraction, "1")[0]
    assert unstored.startswith("near-dependent tokens")
    rotary = mechanisms.context_mechanism(ranks, 1, ROTARY, "0")[0]
    assert rotary == (
        "repeated rows: repeated tokens (positions enter inside attention, as a rotation of "
        "queries and keys)"
    )
    relative = mechanisms.context_mechanism(ranks, 1, RELATIVE, "0")[0]
    assert relative == (
        "repeated rows: repeated tokens (positions enter inside attention, as a relative bias)"
    )


def test_structural_only_where_the_architecture_forces_it():
    assert mechanisms.structural(ROTARY, "0")
    assert mechanisms.structural(ROTARY, "random_attention")
    assert mechanisms.structural(ROTARY, "1") is None
    assert mechanisms.structural(ADDITIVE_CAUSAL, "0") is None
    assert mechanisms.structural(RELATIVE, "1") is None
    relative = mechanisms.structural(RELATIVE, "0")
    assert relative.startswith("positions enter inside attention, as a relative bias")
    assert "rank falls below n" in relative and ";" not in relative  # one clause of a list


def test_query_failures_name_duplicates_and_the_class_token_case():
    rng = np.random.default_rng(0)
    queries = rng.standard_normal((6, 4)).astype(np.float32)
    queries[4] = queries[1]
    queries[5] = 0.0
    found = mechanisms.query_failures(queries, "1")
    assert found == {
        4: ("identical query vectors", "same as example 1"),
        5: ("zero query vector", ""),
    }
    same = np.repeat(queries[:1], 5, axis=0)
    everyone = mechanisms.query_failures(same, "0")
    assert sorted(everyone) == [1, 2, 3, 4]
    assert "does not depend on the input at layer 0" in everyone[1][0]
    assert mechanisms.all_queries_identical(same)


def test_outliers_are_named_with_their_ratio():
    values = np.ones(50)
    values[7] = 390.0
    assert mechanisms.outliers(values, "coordinate") == "coordinate 7 (390× the median)"
    assert mechanisms.outliers(np.ones(5), "coordinate") == ""


def test_check_layer_lists_failures_and_finds_the_applicable_subset():
    rng = np.random.default_rng(1)
    t, n, d = 40, 6, 16
    contexts = rng.standard_normal((t, n, d)).astype(np.float32)
    contexts[2, 5] = contexts[2, 0]  # one failing context
    queries = rng.standard_normal((t, d)).astype(np.float32)
    queries[7] = queries[3]  # one duplicate query: Assumption 1 fails on the whole set
    inputs = [f"document {i}" for i in range(t)]
    checks = check_layer(
        queries,
        context_ranks(contexts),
        n,
        AssumptionsSettings(samples=60),
        60,
        "cpu",
        extraction={"example_inputs": inputs, "positions": "additive", "causal": False},
        layer="1",
    )
    failures = checks.failures.set_index("example")
    assert list(failures.index) == [2, 7]
    assert failures.loc[2, "check"] == "context" and failures.loc[2, "input"] == "document 2"
    assert failures.loc[7, "mechanism"] == "identical query vectors"
    assert checks.kruskal["outcome_n"] == Outcome.DOES_NOT_APPLY.value
    assert checks.kruskal["applies_examples"] == t - 2
    assert "re-checked on the 38 examples left: applies" in checks.kruskal["subset"]
    assert checks.context["outcome"] == Outcome.DOES_NOT_APPLY.value
    assert checks.context["proved_deficient"] == 1
    assert "context (does not apply): repeated rows" in checks.kruskal["failure_mechanisms"]
    # the decision behind Assumption 1: the identical pair proves Kruskal rank ≤ 1
    decided = checks.kruskal["decisions"]["n"]
    assert decided["reading"] == "dependent (exact or structural)"
    assert decided["proof"]["kind"] == "identical pair"
    assert checks.kruskal["mechanism_n"].startswith("identical queries")
    assert checks.kruskal["error"]["source"].startswith("not measured")


def test_every_failing_check_of_the_stored_default_run_names_its_mechanism():
    """No check of the stored default run (tests/data/default_run) that does not apply or is
    too close to call has an empty mechanism, and every kind of outcome occurs there."""
    import pandas as pd
    from report_fixture import FIXTURE

    summary = pd.read_csv(FIXTURE / "files" / "results" / "assumptions" / "summary.csv")
    outcomes = set()
    for check in ("context", "kruskal", "general_position"):
        failing = summary[summary[f"{check}_outcome"] != "applies"]
        outcomes |= set(summary[f"{check}_outcome"])
        named = failing[f"{check}_mechanism"].fillna("").str.strip() != ""
        assert named.all(), failing.loc[~named, ["model", "layer"]].to_dict("records")
    assert {"applies", "does not apply", "too close to call"} <= outcomes
