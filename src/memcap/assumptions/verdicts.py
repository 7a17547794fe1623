"""Outcomes of the capacity theorems' assumptions, per model × layer: the stage's decision.

Pure functions of the numbers the assumptions stage measured (:mod:`memcap.assumptions.checks`).
Every check has one of three outcomes (applies, does not apply, too close to call), or is not
tested, decided against the forward pass's measured error (:mod:`memcap.numerics.error`), the
random null and exact proofs (:mod:`memcap.numerics.decision`). A check applies with a decade
clear of the measured error or as independent as random data; it does not apply only on
dependence beyond both (an exact proof, or more subsets dependent within the error than random
data have), and says "proves" only for an exact proof. A check drawn from random subsets
states its sampling bound (rule of three: no failure in S draws puts the failing fraction
below 3/S with 95% confidence). The stage writes the outcomes and their words into
summary.csv and depth.csv; the report renders them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memcap.assumptions.evidence import MIN_SUBSETS, LayerEvidence
from memcap.assumptions.evidence import evidence_from_row as evidence_from_row  # re-exported
from memcap.assumptions.wording import error_words, query_words
from memcap.numerics.error import CLEAR_DECADES
from memcap.numerics.outcome import Outcome


@dataclass(frozen=True)
class Check:
    """One assumption's outcome with the numbers behind it and the reason in words."""

    name: str
    outcome: Outcome
    evidence: str
    reason: str


@dataclass(frozen=True)
class TheoremReading:
    """What the checks mean for Theorem 1 on this layer.

    Attributes:
        outcome: applies when the H(n−1)+1 bound applies at the layer's n (both assumptions
            apply), does not apply when either check does not, too close to call otherwise.
        n_applicable: the context size at which the hypotheses hold, or None.
        text: one or two sentences for the reader.
    """

    outcome: Outcome
    n_applicable: int | None
    text: str

    def bound(self, heads: int) -> int | None:
        """Theorem 1's lower bound H(n−1)+1 at ``n_applicable`` (None when it does not apply)."""
        return None if self.n_applicable is None else heads * (self.n_applicable - 1) + 1


@dataclass(frozen=True)
class LayerVerdicts:
    """Every check of one model × layer."""

    evidence: LayerEvidence
    contexts: Check
    kruskal: Check
    general_position: Check
    theorem: TheoremReading


def _missing(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _decades(value: float | None) -> str:
    return "" if _missing(value) else f"{value:+.2f} decades"


def _sampling_bound(ev: LayerEvidence, k: int) -> str:
    """Upper bound on the fraction of dependent k-subsets: the stage's, else the rule of three."""
    bound = ev.dependent_bounds.get(k)
    if _missing(bound):
        return f"≤ {min(1.0, 3 / ev.samples):.1%} of {k}-subsets dependent (rule of three, 95%)"
    return f"≤ {bound:.1%} of {k}-subsets dependent (upper confidence bound)"


# The checks' names, as the report shows them.
CHECK_NAMES = {
    "contexts": "Assumption 2 — contexts have rank n",
    "kruskal": "Assumption 1 — Kruskal rank ≥ n",
    "general_position": "General position — Kruskal rank ≥ d",
}


def context_rank_check(ev: LayerEvidence) -> Check:
    """Assumption 2: every context matrix E_t (n × d) has rank n."""
    name = CHECK_NAMES["contexts"]
    if ev.n > ev.d:
        return Check(
            name,
            Outcome.DOES_NOT_APPLY,
            f"n = {ev.n} > d = {ev.d}",
            "an n × d matrix has rank at most d < n, so no context can have rank n",
        )
    if ev.context_outcome is None or _missing(ev.context_full_rank_frac):
        return Check(name, Outcome.NOT_TESTED, "not measured", "no context rank was computed")
    checked = f" of {ev.contexts_checked}" if ev.contexts_checked else ""
    counts = ", ".join(f"{v} {k}" for k, v in ev.context_counts.items())
    margins = "; ".join(
        f"{what} margin {_decades(m)}"
        for what, m in (("worst", ev.worst_margin), ("median", ev.median_margin))
        if not _missing(m)
    )
    evidence = f"{ev.context_full_rank_frac:.1%}{checked} contexts full rank ({counts})"
    evidence += f"; {margins}" if margins else ""
    raw = ev.paper_a.get("context_full_rank_frac")
    if ev.scaling != "none" and not _missing(raw) and raw != ev.context_full_rank_frac:
        evidence += f"; paper A's raw rule: {raw:.1%} full rank"
    error = error_words(ev.context_error, "context")
    if error:
        evidence += f"; {error}, worst context {_decades(ev.context_worst_error_margin)} above it"
    reasons = {
        Outcome.APPLIES: f"every context clears the measured error by at least {CLEAR_DECADES:g} "
        "decade",
        Outcome.DOES_NOT_APPLY: "some contexts are rank-deficient: proved exactly (a repeated "
        "or zero row) or dependent within the measured error",
        Outcome.TOO_CLOSE: "no context is dependent within the measured error, but some lie "
        f"within {CLEAR_DECADES:g} decade of it",
    }
    reason = reasons.get(ev.context_outcome, "not tested")
    if ev.context_outcome in (Outcome.DOES_NOT_APPLY, Outcome.TOO_CLOSE):
        reason += f" ({ev.mechanisms.get('context') or ev.failure_mechanisms})"
    if ev.structural and "Assumption 2" in ev.structural:
        reason += (
            "; cannot hold by construction here: "
            + ev.structural.split("Assumption 2: ")[1].split(";")[0]
        )
    return Check(name, ev.context_outcome, evidence, reason)


def _subset_check(
    name: str, k: int, k_label: str, p: float, outcome: Outcome | None, ev: LayerEvidence
) -> Check:
    """Shared logic of Assumption 1 (k = n) and general position (k = d)."""
    if k > ev.d:
        return Check(
            name,
            Outcome.DOES_NOT_APPLY,
            f"{k_label} = {k} > d = {ev.d}",
            f"more than d vectors in R^d are always dependent, which proves Kruskal rank < {k}",
        )
    decided = ev.decisions.get(k_label, {})
    strict, loose = ev.band.get(f"p_{k_label}_strict"), ev.band.get(f"p_{k_label}_loose")
    sampled = "" if _missing(p) else f"P({k_label}) = {p:.3f} over {ev.samples} subsets at τ"
    beside = [
        f"{label} {value:.3f}"
        for label, value in (("×10 τ", strict), ("÷10 τ", loose))
        if not _missing(value)
    ]
    if sampled and beside:
        sampled += f" ({', '.join(beside)})"
    estimate, zero_line = query_words(ev)
    certified = ""
    if ev.certified_upper is not None and ev.certified_upper < k:
        certified = f"certified Kruskal rank ≤ {ev.certified_upper}"
        if decided.get("proof"):
            certified += f" ({decided['proof']})"
    reading = decided.get("reading", "")
    evidence = "; ".join(
        part for part in (sampled, estimate, certified, zero_line,
                          reading and f"against random data: {reading}") if part
    )  # fmt: skip
    if outcome is None or outcome is Outcome.NOT_TESTED:
        what = f"T = {ev.T} < {k_label} = {k}" if k > ev.T else "not measured"
        return Check(name, Outcome.NOT_TESTED, evidence or what, "no subset to decide on")
    reason = _subset_reason(k, k_label, outcome, decided, ev)
    return Check(name, outcome, evidence, reason)


def _subset_reason(
    k: int, k_label: str, outcome: Outcome, decided: Mapping[str, Any], ev: LayerEvidence
) -> str:
    """Why the check at k has its outcome, in words (from the decision's numbers where the
    stage recorded them)."""
    reading = decided.get("reading", "")
    samples = int(decided.get("samples") or ev.samples)
    zero, null_zero, clear = decided.get("zero"), decided.get("null_zero"), decided.get("clear")
    near = "" if zero is None else (
        f"{int(zero)} of {samples} sampled {k_label}-subsets are dependent within the measured "
        f"error (random data: {int(null_zero or 0)})"
    )  # fmt: skip
    mechanism = ev.mechanisms.get(k_label, "")
    why = f" — {mechanism}" if mechanism else ""
    lead = f"{reading}: " if reading else ""
    if outcome is Outcome.DOES_NOT_APPLY:
        if decided.get("proof"):
            size = int(decided.get("proof_size") or k)
            named = "" if mechanism.startswith(decided["proof"]) else why  # said once
            return (
                f"dependent (exact or structural): {decided['proof']}, which proves Kruskal rank "
                f"≤ {size - 1} < {k}{named}"
            )
        return (
            f"{lead}{near or 'dependent subsets'}, beyond random data and the measured error{why}"
        )
    if outcome is Outcome.APPLIES:
        if clear is None or int(clear) == samples:
            return (
                f"every sampled {k_label}-subset clears the measured error by at least "
                f"{CLEAR_DECADES:g} decade ({lead}{_sampling_bound(ev, k)})"
            )
        return f"{lead}{near}, as random data's are ({_sampling_bound(ev, k)})"
    if ev.samples < MIN_SUBSETS:
        return f"only {ev.samples} draws (< {MIN_SUBSETS}): too few to say"
    worst = _decades(decided.get("worst_margin"))
    return (
        f"{lead}some sampled {k_label}-subsets lie within {CLEAR_DECADES:g} decade of the "
        f"measured error{f' (worst {worst} above its zero line)' if worst else ''}, none "
        f"dependent beyond random data{why}"
    )


def kruskal_check(ev: LayerEvidence) -> Check:
    """Assumption 1: the queries have Kruskal rank ≥ n (every n of them are independent)."""
    return _subset_check(
        CHECK_NAMES["kruskal"], ev.n, "n", ev.kruskal_p_n, ev.kruskal_outcome_n, ev
    )


def general_position_check(ev: LayerEvidence) -> Check:
    """General position: Kruskal rank ≥ d (the classical, stronger assumption)."""
    return _subset_check(
        CHECK_NAMES["general_position"],
        ev.d,
        "d",
        ev.general_position_p_d,
        ev.general_position_outcome_d,
        ev,
    )


def largest_supported_n(ev: LayerEvidence, min_samples: int = MIN_SUBSETS) -> int | None:
    """Largest k in [2, min(n, d)] at which Assumption 1 still applies, or None.

    That is the largest k whose sampled k-subsets are all independent a decade above the
    tolerance (the strict profile), capped by any certified upper bound.
    """
    if ev.samples < min_samples:
        return None
    caps = [ev.n, ev.d]
    caps += [c for c in (ev.band.get("estimate_strict"), ev.rank_upper_bound) if c is not None]
    cap = min(int(c) for c in caps if not _missing(c))
    return cap if cap >= 2 else None


def theorem_reading(ev: LayerEvidence, contexts: Check, kruskal: Check) -> TheoremReading:
    """Whether, and at which n, Theorem 1's H(n−1)+1 bound applies to the layer.

    When only Assumption 1 does not apply and the strict profile shows every sampled k-subset
    independent for some k < n, the bound still holds for contexts cut to k tokens.
    """
    subset = _subset_sentence(ev)
    if contexts.outcome is Outcome.APPLIES and kruskal.outcome is Outcome.APPLIES:
        return TheoremReading(
            Outcome.APPLIES,
            ev.n,
            f"Both assumptions apply at n = {ev.n}: one attention layer with H heads and "
            f"d_h ≥ {ev.n} memorizes at least min({ev.T}, H·{ev.n - 1} + 1) of these "
            f"{ev.T} examples.",
        )
    if Outcome.DOES_NOT_APPLY in (contexts.outcome, kruskal.outcome):
        failed = contexts if contexts.outcome is Outcome.DOES_NOT_APPLY else kruskal
        told = "by construction" in failed.reason
        structural = f" By construction: {ev.structural}." if ev.structural and not told else ""
        k = largest_supported_n(ev) if contexts.outcome is Outcome.APPLIES else None
        if k is not None and k < ev.n:
            return TheoremReading(
                Outcome.DOES_NOT_APPLY,
                k,
                f"Theorem 1 does not apply at n = {ev.n}; Assumption 1 applies up to k = {k}, "
                f"so the bound min({ev.T}, H·{k - 1} + 1) applies to contexts cut to {k} "
                f"tokens.{subset}",
            )
        return TheoremReading(
            Outcome.DOES_NOT_APPLY,
            None,
            f"Theorem 1 does not apply to this layer: {failed.reason}.{structural}{subset}",
        )
    if Outcome.NOT_TESTED in (contexts.outcome, kruskal.outcome):
        untested = [
            c.name.split(" — ")[0] for c in (contexts, kruskal) if c.outcome is Outcome.NOT_TESTED
        ]
        return TheoremReading(
            Outcome.NOT_TESTED,
            None,
            f"Not tested at n = {ev.n}: {' and '.join(untested)} had nothing to decide on.",
        )
    close = [c.name.split(" — ")[0] for c in (contexts, kruskal) if c.outcome is Outcome.TOO_CLOSE]
    verb = "lies" if len(close) == 1 else "lie"
    return TheoremReading(
        Outcome.TOO_CLOSE,
        None,
        f"Too close to call at n = {ev.n}: {' and '.join(close)} {verb} within "
        f"{CLEAR_DECADES:g} decade of the measured error.{subset}",
    )


def _subset_sentence(ev: LayerEvidence) -> str:
    """What Theorem 1 guarantees on the largest subset found where both assumptions apply;
    when that subset is smaller than n, that no useful subset exists."""
    kept = ev.applies_examples
    if kept is None or not ev.T or kept == ev.T:
        return ""
    if kept < ev.n:
        return (
            f" No subset of at least n = {ev.n} examples was found on which both assumptions apply."
        )
    return (
        f" Both assumptions apply to {kept} of the {ev.T} examples: one attention layer with "
        f"H heads and d_h ≥ {ev.n} memorizes at least min({kept}, H·{ev.n - 1} + 1) of them."
    )


def layer_verdicts(ev: LayerEvidence) -> LayerVerdicts:
    """All three checks of one model × layer and their reading for Theorem 1."""
    contexts = context_rank_check(ev)
    kruskal = kruskal_check(ev)
    return LayerVerdicts(
        evidence=ev,
        contexts=contexts,
        kruskal=kruskal,
        general_position=general_position_check(ev),
        theorem=theorem_reading(ev, contexts, kruskal),
    )


# The columns the stage writes for each check: outcome, evidence and reason.
CHECK_COLUMNS = {
    "contexts": "context",
    "kruskal": "kruskal",
    "general_position": "general_position",
}


def verdict_columns(verdicts: LayerVerdicts) -> dict[str, Any]:
    """The outcome columns of a summary / depth row: every check's outcome and words, and
    Theorem 1's outcome, n and text."""
    columns: dict[str, Any] = {}
    for attribute, prefix in CHECK_COLUMNS.items():
        check: Check = getattr(verdicts, attribute)
        columns[f"{prefix}_outcome"] = check.outcome.value
        columns[f"{prefix}_evidence"] = check.evidence
        columns[f"{prefix}_reason"] = check.reason
    columns["theorem1_outcome"] = verdicts.theorem.outcome.value
    columns["theorem1_n"] = verdicts.theorem.n_applicable
    columns["theorem1_text"] = verdicts.theorem.text
    return columns


def verdicts_from_columns(ev: LayerEvidence, row: Mapping[str, Any]) -> LayerVerdicts:
    """The stage's outcomes as written by :func:`verdict_columns` (no decision taken)."""
    checks = {}
    for attribute, prefix in CHECK_COLUMNS.items():
        checks[attribute] = Check(
            CHECK_NAMES[attribute],
            Outcome(row[f"{prefix}_outcome"]),
            str(row[f"{prefix}_evidence"]),
            str(row[f"{prefix}_reason"]),
        )
    n = row.get("theorem1_n")
    return LayerVerdicts(
        evidence=ev,
        theorem=TheoremReading(
            Outcome(row["theorem1_outcome"]),
            None if _missing(n) else int(n),
            str(row["theorem1_text"]),
        ),
        **checks,
    )
