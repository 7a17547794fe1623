"""Merge the capacity stage's per model × layer tables into one."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

LEADING_COLUMNS = ["model", "layer", "H", "certified", "T", "n", "d", "d_h", "bound"]


def summarize(frames: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """One row per model, layer and H, the identifying columns first."""
    table = pd.concat(list(frames), ignore_index=True)
    return table[LEADING_COLUMNS + [c for c in table.columns if c not in LEADING_COLUMNS]]
