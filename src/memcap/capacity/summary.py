"""Merge the capacity stage's per model × layer tables; the spread over shared contexts.

Each layer's table holds every example's own context (one draw) and every shared context ×
attention draw. ``real.csv`` keeps the own rows and the first shared context's first draw (the
first example's context, every H), each shared row with the spread of all its contexts and
draws at that H (``spread_*``, where they were all computed); ``shared_spread.csv`` holds that
spread per model, layer and H.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

LEADING_COLUMNS = ["model", "layer", "H", "certified", "T", "n", "d", "d_h", "bound"]
KEYS = ["model", "layer", "H"]
SPREAD = {
    "spread_runs": ("certified", "size"),
    "spread_median": ("certified", "median"),
    "spread_min": ("certified", "min"),
    "spread_max": ("certified", "max"),
    "spread_resolved": ("resolved", "sum"),
}


def merge(frames: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """Every row of every layer, the identifying columns first."""
    table = pd.concat(list(frames), ignore_index=True)
    return table[LEADING_COLUMNS + [c for c in table.columns if c not in LEADING_COLUMNS]]


def shared_spread(table: pd.DataFrame) -> pd.DataFrame:
    """Per model, layer and H computed for every shared context and draw: the certified
    capacity's median and range over them, how many runs were resolved, and the sizes."""
    shared = table[table["contexts"] == "shared"].assign(
        resolved=lambda f: f["resolved"].astype(bool)
    )
    groups = shared.groupby(KEYS, sort=False)
    spread = groups.agg(
        **SPREAD,
        draws=("draw", "nunique"),
        contexts=("shared_context", "nunique"),
        T=("T", "first"),
        n=("n", "first"),
        d=("d", "first"),
        bound=("bound", "first"),
        ceiling=("ceiling", "first"),
    ).reset_index()
    complete = spread["spread_runs"] == spread["draws"] * spread["contexts"]
    return spread[complete & (spread["spread_runs"] > 1)].reset_index(drop=True)


def first_runs(table: pd.DataFrame, spread: pd.DataFrame) -> pd.DataFrame:
    """The own rows and the first shared context's first draw, with the spread beside the
    shared rows (NaN at an H the spread did not take)."""
    first = (table["contexts"] == "own") | ((table["shared_context"] == 0) & (table["draw"] == 0))
    kept = table[first].reset_index(drop=True)
    columns = KEYS + list(SPREAD)
    beside = spread[columns].assign(contexts="shared")
    return kept.merge(beside, on=[*KEYS, "contexts"], how="left")
