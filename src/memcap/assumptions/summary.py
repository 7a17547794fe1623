"""Rows of results/assumptions/summary.csv from a layer's check records."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

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
    """One row of summary.csv: the contracted columns, then certificates and margins."""
    best = min(kruskal["certificates"], key=lambda c: c["size"], default=None)
    n_interval = kruskal.get("p_n_interval", [math.nan, math.nan])
    return {
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
    }


def summary_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """summary.csv: the contracted columns first (present even with no rows), then extras."""
    if not rows:
        return pd.DataFrame(columns=list(SUMMARY_COLUMNS))
    table = pd.DataFrame(rows)
    extras = [c for c in table.columns if c not in SUMMARY_COLUMNS]
    return table[list(SUMMARY_COLUMNS) + extras]
