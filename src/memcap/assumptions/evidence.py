"""What the assumptions stage measured on one model × layer, as the stage writes it.

:class:`LayerEvidence` holds the numbers of one row of summary.csv (and depth.csv);
:func:`evidence_from_row` reads them back, so the report reaches the stage's words without
deciding anything again.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from memcap.numerics.outcome import Outcome

# Fewer random orderings than this cannot support "applies" (3/S would exceed 10%).
MIN_SUBSETS = 30


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
        kruskal_rank_estimate: largest k with P(k) = 1 in the profile (at τ).
        error_estimate, error_estimate_clear: lower bounds on the largest k whose sampled
            k-subsets are all independent within the measured error / a decade clear of it
            (:func:`memcap.assumptions.records.error_estimate`); None when not resolved.
        samples: random orderings drawn.
        rank_upper_bound: Kruskal rank bound proved by a certificate; None when not measured.
        rank_lower_bound: the exact lower bound (0, 1 or 2: zero vectors and pairs).
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
        query_error, context_error: the measured relative errors the checks decide against.
        query_error_aligned: δ_aligned, the part of the query error the vectors share.
        error_source: where the query error comes from.
        decisions: per decided size ("n", "d"): reading, decades below the null, sampled
            subsets under the zero line (``zero``; the null's ``null_zero``), ``clear`` ones,
            ``samples``, ``worst_margin`` and the ``proof`` that decided it.
        certified_upper: the Kruskal rank bound exact proofs give at the measured error.
        mechanisms: per check ("context", "n", "d"): why it fails or is too close to call.
        structure: the structures detected in the queries, in words.
        context_worst_error_margin: the worst context's log10(σ_min/σ_max ÷ zero line).
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
    query_error: float | None = None
    context_error: float | None = None
    error_source: str = ""
    decisions: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    certified_upper: int | None = None
    mechanisms: Mapping[str, str] = field(default_factory=dict)
    structure: str = ""
    context_worst_error_margin: float | None = None
    error_estimate: int | None = None
    error_estimate_clear: int | None = None
    query_error_aligned: float | None = None
    rank_lower_bound: int | None = None


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
        if _optional(row, f"contexts_{o.slug}") is not None and int(row[f"contexts_{o.slug}"])
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
        query_error=_optional(row, "query_error"),
        context_error=_optional(row, "context_error"),
        error_source=_text(row.get("query_error_source")),
        decisions={key: _decision(row, prefix) for prefix, key in DECIDED.items()},
        certified_upper=_optional_int(row, "kruskal_certified_upper"),
        mechanisms={
            "context": _text(row.get("context_mechanism")),
            **{key: _text(row.get(f"{prefix}_mechanism")) for prefix, key in DECIDED.items()},
        },
        structure=_text(row.get("structure")),
        context_worst_error_margin=_optional(row, "context_worst_error_margin"),
        error_estimate=_optional_int(row, "kruskal_error_estimate"),
        error_estimate_clear=_optional_int(row, "kruskal_error_estimate_clear"),
        query_error_aligned=_optional(row, "query_error_aligned"),
        rank_lower_bound=_optional_int(row, "kruskal_rank_lower_bound"),
    )


# Per decided size: the summary columns' prefix and the key of LayerEvidence.decisions.
DECIDED = {"kruskal": "n", "general_position": "d"}


def _decision(row: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """One decided size's numbers from its summary columns (missing ones left out)."""
    numbers = {
        key: _optional(row, f"{prefix}_{column}")
        for key, column in (
            ("decades", "null_decades"), ("zero", "zero_subsets"),
            ("null_zero", "null_zero_subsets"), ("clear", "clear_subsets"),
            ("samples", "decided_samples"), ("worst_margin", "worst_error_margin"),
            ("proof_size", "proof_size"),
        )
    }  # fmt: skip
    texts = {
        "reading": _text(row.get(f"{prefix}_reading")),
        "proof": _text(row.get(f"{prefix}_proof")),
    }
    return {k: v for k, v in (numbers | texts).items() if v not in (None, "")}


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
