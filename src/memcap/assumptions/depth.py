"""The depth profile of one model: every audited layer's assumption checks in one table.

Detail layers and depth rows are checked by the same functions, depth rows with fewer
orderings. Each row says whether Theorem 1 applies at the layer, by the stage's outcomes
(:mod:`memcap.assumptions.verdicts`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from memcap.assumptions.summary import summary_row
from memcap.numerics import Outcome

ROLES = ("detail", "depth")
# The contracted columns of depth.csv, in order; the columns of summary.csv follow them.
DEPTH_COLUMNS = (
    "model",
    "layer",
    "role",
    "samples",
    "n",
    "d",
    "T",
    "p_n",
    "kruskal_estimate",
    "kruskal_lower",
    "kruskal_upper",
    "dependent_bound",
    "context_full_rank_fraction",
    "theorem1_applies",
    "theorem1",
)
# Columns of depth.csv that summary.csv names otherwise (or lacks).
_DEPTH_ONLY = set(DEPTH_COLUMNS[7:])


def depth_row(
    model: str,
    layer: str,
    role: str,
    context: Mapping[str, Any],
    kruskal: Mapping[str, Any],
) -> dict[str, Any]:
    """One row of depth.csv from a layer's context-rank and Kruskal records (as in the JSONs)."""
    if role not in ROLES:
        raise ValueError(f"role {role!r} is not one of {ROLES}")
    summary = summary_row(model, layer, context, kruskal)
    row = {
        "model": model,
        "layer": layer,
        "role": role,
        "samples": kruskal["samples"],
        "n": kruskal["n"],
        "d": kruskal["d"],
        "T": kruskal["T"],
        "p_n": kruskal["p_n"],
        "kruskal_estimate": kruskal["estimate"],
        "kruskal_lower": kruskal["lower_bound"],
        "kruskal_upper": kruskal["upper_bound"],
        "dependent_bound": kruskal.get("dependent_bound_n", np.nan),
        "context_full_rank_fraction": context["full_rank_frac"],
        "theorem1_applies": summary["theorem1_outcome"] == Outcome.APPLIES.value,
        "theorem1": summary["theorem1_outcome"],
    }
    return row | {key: value for key, value in summary.items() if key not in row}


def layer_order(layer: str) -> tuple[int, str]:
    """Numeric layers first, in order, then named variants (random_attention)."""
    return (int(layer), "") if str(layer).isdigit() else (10**6, str(layer))


def depth_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """depth.csv: one row per audited layer, numeric layers in order, random_attention last."""
    if not rows:
        return pd.DataFrame(columns=list(DEPTH_COLUMNS))
    ordered = sorted(rows, key=lambda row: layer_order(row["layer"]))
    table = pd.DataFrame(ordered)
    return table[list(DEPTH_COLUMNS) + [c for c in table.columns if c not in DEPTH_COLUMNS]]


def summary_rows(table: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows of summary.csv a depth table holds (its layers, with their role)."""
    keep = [c for c in table.columns if c not in _DEPTH_ONLY]
    return table[keep].to_dict("records")


def profiles_table(profiles: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """depth_profiles.csv: the P(k) profile rows of every depth row, with a layer column."""
    frames = [profile.assign(layer=layer) for layer, profile in profiles.items()]
    if not frames:
        return pd.DataFrame(columns=["layer", "k", "p_full_rank"])
    table = pd.concat(frames, ignore_index=True)
    return table[["layer"] + [c for c in table.columns if c != "layer"]]
