"""Rows of results/assumptions/summary.csv from a layer's check records."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from memcap.assumptions.evidence import BAND_COLUMNS, DECIDED, evidence_from_row
from memcap.assumptions.verdicts import layer_verdicts, verdict_columns
from memcap.numerics import Outcome

# The contracted columns of results/assumptions/summary.csv, in order; extras follow them.
SUMMARY_COLUMNS = (
    "model",
    "layer",
    "T",
    "n",
    "d",
    "samples",
    "context_full_rank_frac",
    "kruskal_p_n",
    "general_position_p_d",
    "kruskal_rank_estimate",
)


def summary_row(
    model: str, layer: str, context: Mapping[str, Any], kruskal: Mapping[str, Any]
) -> dict[str, Any]:
    """One row of summary.csv: the contracted columns, then certificates and margins, the
    band, paper A's raw rule, the failure analysis and the stage's outcomes."""
    best = min(kruskal["certificates"], key=lambda c: c["size"], default=None)
    n_interval = kruskal.get("p_n_interval", [math.nan, math.nan])
    row = {
        "model": model,
        "layer": layer,
        "T": kruskal["T"],
        "n": kruskal["n"],
        "d": kruskal["d"],
        "samples": kruskal["samples"],
        "context_full_rank_frac": context["full_rank_frac"],
        "kruskal_p_n": kruskal["p_n"],
        "general_position_p_d": kruskal["p_d"],
        "kruskal_rank_estimate": kruskal["estimate"],
        "kruskal_p_n_low": n_interval[0],
        "kruskal_p_n_high": n_interval[1],
        "kruskal_dependent_bound_n": kruskal.get("dependent_bound_n", math.nan),
        "kruskal_rank_upper_bound": kruskal["upper_bound"],
        "kruskal_rank_lower_bound": kruskal["lower_bound"],
        "kruskal_certificate": best["kind"] if best else "",
        "zero_queries": kruskal["pairs"]["zero_rows"],
        "duplicate_pairs": kruskal["pairs"]["duplicate_pairs"],
        "dependent_pairs": kruskal["pairs"]["dependent_pairs"],
        "near_duplicate_pairs": kruskal["pairs"]["near_duplicate_pairs"],
        "spectral_cap": kruskal["spectral_cap"],
        "contexts_checked": context["contexts_checked"],
        "context_rank_min": context["rank_min"],
        "context_worst_margin": context["worst_margin"],
        "context_svd_checked": context["svd_checked"],
        "rtol_queries": kruskal["rtol"],
        "rtol_contexts": context["rtol"],
        "kruskal_route": kruskal["route"],
        "kruskal_seconds": kruskal["seconds"],
    } | band_columns(context, kruskal)
    return row | verdict_columns(layer_verdicts(evidence_from_row(row)))


def band_columns(context: Mapping[str, Any], kruskal: Mapping[str, Any]) -> dict[str, Any]:
    """The band, paper A's raw rule and the failure analysis of one layer, as columns."""
    band, raw = kruskal.get("band", {}), kruskal.get("paper_a", {})
    counts = context.get("outcome_counts", {})
    columns = {
        "scaling": kruskal.get("scaling", "none"),
        "context_band_outcome": context.get("outcome"),
        "context_median_margin": context.get("median_margin"),
        "contexts_proved_deficient": context.get("proved_deficient"),
        "kruskal_band_outcome_n": kruskal.get("outcome_n"),
        "general_position_band_outcome_d": kruskal.get("outcome_d"),
    }
    columns |= {f"contexts_{o.slug}": counts.get(o.value, 0) for o in Outcome}
    columns |= {column: band.get(key) for key, column in BAND_COLUMNS.items()}
    columns |= {
        "paper_a_p_n": raw.get("p_n"),
        "paper_a_p_d": raw.get("p_d"),
        "paper_a_estimate": raw.get("estimate"),
        "paper_a_context_full_rank_frac": context.get("paper_a", {}).get("full_rank_frac"),
        "ill_conditioning": kruskal.get("ill_conditioning", ""),
        "failure_mechanisms": kruskal.get("failure_mechanisms", ""),
        "structural": kruskal.get("structural", ""),
        "applies_examples": kruskal.get("applies_examples"),
        "applies_subset": kruskal.get("subset", ""),
    }
    return columns | scale_columns(context, kruskal)


def scale_columns(context: Mapping[str, Any], kruskal: Mapping[str, Any]) -> dict[str, Any]:
    """The measured error, the null, the proofs and the named structure of one layer, with
    today's τ outcomes beside them."""
    error, context_error = kruskal.get("error") or {}, context.get("error") or {}
    spectrum = kruskal.get("spectrum") or {}
    at_error = kruskal.get("error_estimate") or {}
    columns: dict[str, Any] = {
        "query_error": error.get("relative"),
        "query_error_aligned": error.get("aligned"),
        "query_error_source": error.get("source", ""),
        "kruskal_error_estimate": at_error.get("independent"),
        "kruskal_error_estimate_clear": at_error.get("clear"),
        "context_error": context_error.get("relative"),
        "context_worst_error_margin": context.get("worst_error_margin"),
        "context_median_error_margin": context.get("median_error_margin"),
        "context_mechanism": context.get("mechanism", ""),
        "context_tau_outcome": context.get("tau_outcome"),
        "kruskal_certified_upper": kruskal.get("certified_upper"),
        "structure": "; ".join(
            f"{s['name']}: {s['detail']}" for s in kruskal.get("structure") or []
        ),
        "shared_energy": spectrum.get("shared_share"),
        "centred_rank": spectrum.get("centred_rank"),
        "centred_k90": spectrum.get("centred_k90"),
    }
    for prefix, key in DECIDED.items():
        decided = (kruskal.get("decisions") or {}).get(key) or {}
        proof = decided.get("proof") or {}
        columns |= {
            f"{prefix}_reading": decided.get("reading", ""),
            f"{prefix}_null_decades": decided.get("decades"),
            f"{prefix}_zero_subsets": decided.get("zero"),
            f"{prefix}_null_zero_subsets": decided.get("null_zero"),
            f"{prefix}_clear_subsets": decided.get("clear"),
            f"{prefix}_decided_samples": decided.get("samples"),
            f"{prefix}_worst_error_margin": decided.get("worst_margin"),
            f"{prefix}_proof": f"{proof['kind']}: {proof['detail']}" if proof else "",
            f"{prefix}_proof_size": proof.get("size"),
            f"{prefix}_mechanism": kruskal.get(f"mechanism_{key}", ""),
            f"{prefix}_tau_outcome": kruskal.get(f"tau_outcome_{key}"),
        }
    return columns


def summary_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """summary.csv: the contracted columns first (present even with no rows), then extras."""
    if not rows:
        return pd.DataFrame(columns=list(SUMMARY_COLUMNS))
    table = pd.DataFrame(rows)
    extras = [c for c in table.columns if c not in SUMMARY_COLUMNS]
    return table[list(SUMMARY_COLUMNS) + extras]
