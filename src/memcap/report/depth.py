"""Where along a model's depth Theorem 1 applies, from its depth table (depth.csv)."""

from __future__ import annotations

import pandas as pd

NEVER = "never"
NONE = "—"


def _numbered(table: pd.DataFrame) -> pd.DataFrame:
    return table[table["layer"].astype(str).str.isdigit()]


def theorem_span(table: pd.DataFrame) -> tuple[str, str]:
    """(first, last) numbered layer at which Theorem 1 applies.

    ``first`` is "never" when it applies at no numbered layer; ``last`` is "—" unless it stops
    holding before the deepest audited layer (then the last layer at which it applies).
    """
    rows = _numbered(table)
    layers = rows["layer"].astype(int)
    applies = sorted(layers[rows["theorem1_applies"].astype(str).str.lower() == "true"])
    if not applies:
        return NEVER, NONE
    last = applies[-1]
    return str(applies[0]), str(last) if last < layers.max() else NONE


def theorem_gaps(table: pd.DataFrame) -> str:
    """Numbered layers after the first where Theorem 1 does not apply, with the verdict.

    E.g. "3 (fail)" or "10, 11 (inconclusive); 12 (fail)"; "—" when there are none. Tables
    without the ``theorem1`` verdict column count every such layer as "fail".
    """
    rows = _numbered(table).assign(layer=lambda t: t["layer"].astype(int)).sort_values("layer")
    applies = rows["theorem1_applies"].astype(str).str.lower() == "true"
    if not applies.any():
        return NONE
    after = rows[(rows["layer"] > rows.loc[applies, "layer"].min()) & ~applies]
    verdicts = after["theorem1"] if "theorem1" in after else pd.Series("fail", after.index)
    groups: list[tuple[str, list[str]]] = []
    for layer, verdict in zip(after["layer"], verdicts.astype(str), strict=True):
        if groups and groups[-1][0] == verdict:
            groups[-1][1].append(str(layer))
        else:
            groups.append((verdict, [str(layer)]))
    return "; ".join(f"{', '.join(layers)} ({verdict})" for verdict, layers in groups) or NONE
