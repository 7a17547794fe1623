"""Where along a model's depth Theorem 1 applies, from its depth table (depth.csv)."""

from __future__ import annotations

import pandas as pd

NEVER = "never"
NONE = "—"


def theorem_span(table: pd.DataFrame) -> tuple[str, str]:
    """(first, last) numbered layer at which Theorem 1 applies.

    ``first`` is "never" when it applies at no numbered layer; ``last`` is "—" unless it stops
    holding before the deepest audited layer (then the last layer at which it applies).
    """
    rows = table[table["layer"].astype(str).str.isdigit()]
    layers = rows["layer"].astype(int)
    applies = sorted(layers[rows["theorem1_applies"].astype(str).str.lower() == "true"])
    if not applies:
        return NEVER, NONE
    last = applies[-1]
    return str(applies[0]), str(last) if last < layers.max() else NONE
