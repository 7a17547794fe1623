"""Where along a model's depth Theorem 1 applies: from its depth table, and per layer verdict."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from memcap.assumptions.verdicts import Outcome
from memcap.extract.config import FAMILY_KINDS
from memcap.report.context import DepthStrip, LayerSection, StripCell, layers_by_model
from memcap.report.loaders import ModelInfo, layer_ranges
from memcap.report.paper_a import paper_a_values

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

    E.g. "3 (does not apply)" or "10, 11 (too close to call); 12 (does not apply)"; "—" when
    there are none. Tables without the ``theorem1`` outcome column count every such layer as
    "does not apply".
    """
    rows = _numbered(table).assign(layer=lambda t: t["layer"].astype(int)).sort_values("layer")
    applies = rows["theorem1_applies"].astype(str).str.lower() == "true"
    if not applies.any():
        return NONE
    after = rows[(rows["layer"] > rows.loc[applies, "layer"].min()) & ~applies]
    verdicts = (
        after["theorem1"]
        if "theorem1" in after
        else pd.Series(Outcome.DOES_NOT_APPLY.value, after.index)
    )
    groups: list[tuple[str, list[str]]] = []
    for layer, verdict in zip(after["layer"], verdicts.astype(str), strict=True):
        if groups and groups[-1][0] == verdict:
            groups[-1][1].append(str(layer))
        else:
            groups.append((verdict, [str(layer)]))
    return "; ".join(f"{', '.join(layers)} ({verdict})" for verdict, layers in groups) or NONE


def paper_context_sizes(models: Sequence[ModelInfo]) -> dict[str, int]:
    """Per model of a kind paper A audited: the context size n paper A tested that kind at."""
    kinds = paper_a_values()["kinds"]
    sizes = {}
    for model in models:
        kind = FAMILY_KINDS.get(model.family, model.family)
        if kind in kinds:
            sizes[model.name] = int(kinds[kind]["n"])
    return sizes


def tested_at(n: int, paper_n: int | None) -> str:
    """The context size a model was tested at, beside paper A's for its kind."""
    if paper_n is None:
        return f"tested at n = {n}"
    same = " (as paper A)" if paper_n == n else f" (paper A: n = {paper_n})"
    return f"tested at n = {n}{same}"


def depth_strips(
    layers: Sequence[LayerSection], paper_n: Mapping[str, int] | None = None
) -> list[DepthStrip]:
    """Per model, in page order: Theorem 1's verdict at every audited layer, where it holds,
    and at which n it was tested beside paper A's n (``paper_n``, per model)."""
    strips = []
    for model, ordered in layers_by_model(layers).items():
        cells = tuple(
            StripCell(s.verdicts.evidence.layer, s.verdicts.theorem.outcome, s.anchor)
            for s in ordered
        )
        applies = [c.layer for c in cells if c.verdict is Outcome.APPLIES]
        named = layer_ranges(applies).replace("random_attention", "RA")
        where = f"applies at {named}" if applies else "applies at no audited layer"
        n = ordered[0].verdicts.evidence.n
        where += f"; {tested_at(n, (paper_n or {}).get(model))}"
        strips.append(DepthStrip(model, cells, where))
    return strips
