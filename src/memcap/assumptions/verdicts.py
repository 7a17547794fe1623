"""Outcomes of the capacity theorems' assumptions, per model × layer: the stage's decision.

Pure functions of the numbers the assumptions stage measured (:mod:`memcap.assumptions.checks`).
Every check has one of three outcomes against the symmetric band of
:mod:`memcap.numerics.band` (applies, does not apply, too close to call), or is not tested.
A check applies only with a decade of margin; it does not apply only on dependence that
survives a tolerance a decade below the rounding level, or on an exact proof. A check drawn
from random subsets states its sampling bound (rule of three: no failure in S draws puts the
failing fraction below 3/S with 95% confidence). The stage writes the outcomes and their
words into summary.csv and depth.csv; the report renders them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from memcap.assumptions.checks import MIN_SUBSETS
from memcap.numerics import BAND_DECADES, Outcome


@dataclass(frozen=True)
class LayerEvidence:
    """What the assumptions stage measured on one model × layer (a row of summary.csv).

    Attributes:
        context_full_rank_frac: fraction of the checked contexts with rank n (at τ).
        context_outcome: the contexts' outcome (the worst of the per-context outcomes).
        context_counts: contexts per outcome.
        worst_margin, median_margin: log10(σ_min / tolerance) of the worst and the median
            context; None when not measured.
        kruskal_p_n, general_position_p_d: P(n), P(d) at τ.
        kruskal_outcome_n, general_position_outcome_d: their outcomes against the band.
        band: P(n), P(d) at 10·τ (``*_strict``) and τ/10 (``*_loose``).
        kruskal_rank_estimate: largest k with P(k) = 1 in the profile.
        samples: random orderings drawn.
        rank_upper_bound: Kruskal rank bound proved by a certificate; None when not measured.
        certificate: kind of the certificate behind ``rank_upper_bound``.
        duplicate_pairs: pairs of bitwise identical query vectors.
        profile: P(k) for every k probed.
        dependent_bounds: per k, upper confidence bound on the fraction of dependent k-subsets.
        scaling: equilibrate or none.
        paper_a: paper A's raw rule: p_n, p_d, estimate, context_full_rank_frac.
        ill_conditioning: outlier coordinates / high-norm queries when the rules disagree.
        failure_mechanisms: the failing examples' mechanisms with counts.
        structural: why a check cannot hold by construction for the architecture ("" if not).
        applies_examples: the largest subset found on which both assumptions apply.
    """

    model: str
    layer: str
    T: int
    n: int
    d: int
    samples: int
    context_full_rank_frac: float
    kruskal_p_n: float
    general_position_p_d: float
    kruskal_rank_estimate: int | None
    contexts_checked: int | None = None
    worst_margin: float | None = None
    median_margin: float | None = None
    context_outcome: Outcome | None = None
    context_counts: Mapping[str, int] = field(default_factory=dict)
    kruskal_outcome_n: Outcome | None = None
    general_position_outcome_d: Outcome | None = None
    band: Mapping[str, float] = field(default_factory=dict)
    rank_upper_bound: int | None = None
    certificate: str = ""
    duplicate_pairs: int | None = None
    profile: Mapping[int, float] = field(default_factory=dict)
    dependent_bounds: Mapping[int, float] = field(default_factory=dict)
    scaling: str = "equilibrate"
    paper_a: Mapping[str, float] = field(default_factory=dict)
    ill_conditioning: str = ""
    failure_mechanisms: str = ""
    structural: str = ""
    applies_examples: int | None = None


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
    reasons = {
        Outcome.APPLIES: f"every context clears the rank tolerance by at least {BAND_DECADES:g} "
        "decade",
        Outcome.DOES_NOT_APPLY: "some contexts are rank-deficient, proved exactly or still "
        f"{BAND_DECADES:g} decade below the tolerance",
        Outcome.TOO_CLOSE: f"no context is proved deficient, but some lie within "
        f"{BAND_DECADES:g} decade of the tolerance",
    }
    reason = reasons.get(ev.context_outcome, "not tested")
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
            f"more than d vectors in R^d are always dependent, so the Kruskal rank is < {k}",
        )
    strict, loose = ev.band.get(f"p_{k_label}_strict"), ev.band.get(f"p_{k_label}_loose")
    sampled = "" if _missing(p) else f"P({k_label}) = {p:.3f} over {ev.samples} subsets"
    beside = [
        f"{label} {value:.3f}"
        for label, value in (("×10 tolerance", strict), ("÷10 tolerance", loose))
        if not _missing(value)
    ]
    if sampled and beside:
        sampled += f" ({', '.join(beside)})"
    estimate = (
        "" if ev.kruskal_rank_estimate is None else f"Kruskal rank ≈ {ev.kruskal_rank_estimate}"
    )
    certified = ""
    if ev.rank_upper_bound is not None and ev.rank_upper_bound < k:
        how = f" ({ev.certificate.replace('_', ' ')})" if ev.certificate else ""
        certified = f"certified Kruskal rank ≤ {ev.rank_upper_bound}{how}"
        if ev.duplicate_pairs:
            certified += f"; {ev.duplicate_pairs} pairs of identical queries"
    evidence = "; ".join(part for part in (sampled, estimate, certified) if part)
    if outcome is None or outcome is Outcome.NOT_TESTED:
        what = f"T = {ev.T} < {k_label} = {k}" if k > ev.T else "not measured"
        return Check(name, Outcome.NOT_TESTED, evidence or what, "no subset to decide on")
    reasons = {
        Outcome.APPLIES: f"every sampled {k_label}-subset is independent with "
        f"{BAND_DECADES:g} decade to spare ({_sampling_bound(ev, k)})",
        Outcome.DOES_NOT_APPLY: f"some {k_label}-subset stays dependent at a tolerance "
        f"{BAND_DECADES:g} decade below the rounding level, which proves Kruskal rank < {k}",
        Outcome.TOO_CLOSE: f"no {k_label}-subset is dependent a decade below the tolerance, "
        f"but some are not independent a decade above it",
    }
    if outcome is Outcome.TOO_CLOSE and ev.samples < MIN_SUBSETS:
        reasons[Outcome.TOO_CLOSE] = f"only {ev.samples} draws (< {MIN_SUBSETS}): too few to say"
    return Check(name, outcome, evidence, reasons[outcome])


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
            f"d_h ≥ {ev.n} memorizes at least H·{ev.n - 1} + 1 of these examples.",
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
                f"so the bound H·{k - 1} + 1 applies to contexts cut to {k} tokens.{subset}",
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
        f"{BAND_DECADES:g} decade of the rank tolerance.{subset}",
    )


def _subset_sentence(ev: LayerEvidence) -> str:
    """What Theorem 1 guarantees on the largest subset where both assumptions apply."""
    kept = ev.applies_examples
    if not kept or not ev.T:
        return ""
    if kept <= ev.n:  # H(n−1)+1 ≥ n ≥ kept for every H ≥ 1
        what = f"memorizes all {kept} of them for any H"
    else:
        what = f"memorizes at least min({kept}, H·{ev.n - 1} + 1) of them"
    return (
        f" Both assumptions apply to {kept} of the {ev.T} examples: one attention layer with "
        f"H heads and d_h ≥ {ev.n} {what}."
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


def evidence_from_row(
    row: Mapping[str, Any],
    profile: Mapping[int, float] | None = None,
    dependent_bounds: Mapping[int, float] | None = None,
) -> LayerEvidence:
    """The :class:`LayerEvidence` of one row of summary.csv (as written or as read back)."""
    bounds = dict(dependent_bounds or {})
    bound_n = _optional(row, "kruskal_dependent_bound_n")
    if bound_n is not None:
        bounds.setdefault(int(row["n"]), bound_n)
    certificate = row.get("kruskal_certificate")
    counts = {
        o.value: int(row[f"contexts_{o.slug}"])
        for o in Outcome
        if not _missing(_optional(row, f"contexts_{o.slug}")) and int(row[f"contexts_{o.slug}"])
    }
    outcome = row.get("context_band_outcome")
    return LayerEvidence(
        model=str(row["model"]),
        layer=str(row["layer"]),
        T=int(row["T"]),
        n=int(row["n"]),
        d=int(row["d"]),
        samples=int(row["samples"]),
        context_full_rank_frac=float(row["context_full_rank_frac"]),
        kruskal_p_n=float(row["kruskal_p_n"]),
        general_position_p_d=float(row["general_position_p_d"]),
        kruskal_rank_estimate=_optional_int(row, "kruskal_rank_estimate"),
        contexts_checked=_optional_int(row, "contexts_checked"),
        worst_margin=_optional(row, "context_worst_margin"),
        median_margin=_optional(row, "context_median_margin"),
        context_outcome=Outcome(outcome) if isinstance(outcome, str) else None,
        context_counts=counts,
        kruskal_outcome_n=_outcome(row, "kruskal_band_outcome_n"),
        general_position_outcome_d=_outcome(row, "general_position_band_outcome_d"),
        band={
            key: float(row[column])
            for key, column in BAND_COLUMNS.items()
            if _optional(row, column) is not None
        },
        rank_upper_bound=_optional_int(row, "kruskal_rank_upper_bound"),
        certificate=certificate if isinstance(certificate, str) else "",
        duplicate_pairs=_optional_int(row, "duplicate_pairs"),
        profile=dict(profile or {}),
        dependent_bounds=bounds,
        scaling=str(row.get("scaling", "none")),
        paper_a={
            key: float(row[f"paper_a_{key}"])
            for key in ("p_n", "p_d", "estimate", "context_full_rank_frac")
            if _optional(row, f"paper_a_{key}") is not None
        },
        ill_conditioning=_text(row.get("ill_conditioning")),
        failure_mechanisms=_text(row.get("failure_mechanisms")),
        structural=_text(row.get("structural")),
        applies_examples=_optional_int(row, "applies_examples"),
    )


# LayerEvidence.band keys and the summary columns they come from.
BAND_COLUMNS = {
    "p_n_strict": "kruskal_p_n_strict",
    "p_n_loose": "kruskal_p_n_loose",
    "p_d_strict": "general_position_p_d_strict",
    "p_d_loose": "general_position_p_d_loose",
    "estimate_strict": "kruskal_estimate_strict",
    "estimate_loose": "kruskal_estimate_loose",
}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _optional(row: Mapping[str, Any], key: str) -> float | None:
    value = row.get(key)
    if value is None or isinstance(value, str):
        return None
    value = float(value)
    return None if math.isnan(value) else value


def _optional_int(row: Mapping[str, Any], key: str) -> int | None:
    value = _optional(row, key)
    return None if value is None else int(value)


def _outcome(row: Mapping[str, Any], key: str) -> Outcome | None:
    value = row.get(key)
    return Outcome(value) if isinstance(value, str) and value else None
