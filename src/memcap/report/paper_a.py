"""The "paper A reported / this run" table: paper A's real-data results beside ours.

Paper A's values live in ``paper_a_real.yaml`` beside this module (with their source); this
module only matches them to this run's model × layer rows (by family, random or pretrained
weights, and layer) and reads each pair in one line.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from memcap.extract.config import FAMILY_KINDS
from memcap.report.context import Table
from memcap.report.loaders import ModelInfo
from memcap.report.verdicts import LayerEvidence

PAPER_A_FILE = Path(__file__).with_name("paper_a_real.yaml")
LAYER_NAMES = {"0": "embeddings", "1": "block 1", "random_attention": "random attention"}
COLUMNS = (
    "kind",
    "layer",
    "weights",
    "paper A: model, data",
    "paper n / d",
    "paper P(n)",
    "paper P(d)",
    "this run: model, data",
    "our n / d",
    "our P(n)",
    "our P(d)",
    "our Kruskal estimate",
    "reading",
)
AGREE_HIGH = 0.99  # both at least this: both say "independent"
AGREE_LOW = 0.01  # both at most this: both say "dependent"


@lru_cache(maxsize=1)
def paper_a_values(path: str | Path = PAPER_A_FILE) -> dict[str, Any]:
    """Paper A's real-data values, keyed by family kind (vit, encoder, decoder)."""
    return yaml.safe_load(Path(path).read_text())


def weights_class(model: ModelInfo) -> str:
    """``random`` or ``pretrained`` (any loaded checkpoint counts as pretrained)."""
    return "random" if model.weights_source.lower().startswith("random") else "pretrained"


def _same(paper: float, ours: float) -> bool:
    """Both say "independent" (>= AGREE_HIGH) or both say "dependent" (<= AGREE_LOW)."""
    return (ours >= AGREE_HIGH and paper >= AGREE_HIGH) or (
        ours <= AGREE_LOW and paper <= AGREE_LOW
    )


def reading(
    paper_p: float | None,
    ours: float,
    paper_n: int,
    our_n: int,
    differs: str,
    audit: str,
    paper_p_d: float | None = None,
    ours_p_d: float = math.nan,
) -> str:
    """One line: does this run agree with paper A at k = n (and k = d); if not, why likely."""
    if paper_p is None:
        return "paper A did not report this layer"
    if math.isnan(ours):
        return "not measured here (T < n)"
    at = "" if paper_n == our_n else f" (at n = {our_n} here, {paper_n} in paper A)"
    general = ""
    if paper_p_d is not None and not math.isnan(ours_p_d):
        word = "agrees" if _same(paper_p_d, ours_p_d) else "differs"
        general = f"; P(d) = {ours_p_d:.3g} vs {paper_p_d:.3g} ({word})"
    if _same(paper_p, ours):
        return f"agrees: P(n) = {ours:.3g} vs {paper_p:.3g}{at}{general}"
    reason = audit if audit.startswith("inputs duplicated") else differs
    return f"differs: P(n) = {ours:.3g} vs {paper_p:.3g}{at}{general}; likely reason: {reason}"


def comparison_table(
    evidence: Sequence[LayerEvidence],
    models: Mapping[str, ModelInfo],
    values: Mapping[str, Any] | None = None,
) -> Table | None:
    """One row per paper-A row and per matching model × layer of this run.

    Paper rows with no model of this run, and layers of this run that paper A did not
    report, each get a row too, so nothing is silently dropped. None when nothing matches.
    """
    values = values or paper_a_values()
    rows: list[tuple[str, ...]] = []
    matched: set[tuple[str, str, str]] = set()
    for ev in evidence:
        model = models.get(ev.model)
        kind = FAMILY_KINDS.get(model.family, model.family) if model else None
        if kind not in values["kinds"]:
            continue
        paper = values["kinds"][kind]
        weights = weights_class(model)
        row = _paper_row(paper, weights, ev.layer)
        if row is not None:
            matched.add((kind, weights, ev.layer))
        rows.append(_row(paper, row, weights, ev, model))
    if not rows:
        return None
    for family, paper in values["kinds"].items():
        for row in paper["rows"]:
            key = (family, row["weights"], str(row["layer"]))
            if key not in matched:
                rows.append(_unmatched(paper, row))
    return Table(COLUMNS, tuple(rows))


def _paper_row(paper: Mapping[str, Any], weights: str, layer: str) -> dict[str, Any] | None:
    for row in paper["rows"]:
        if row["weights"] == weights and str(row["layer"]) == layer:
            return row
    return None


def _number(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:.4g}"


def _row(
    paper: Mapping[str, Any],
    row: Mapping[str, Any] | None,
    weights: str,
    ev: LayerEvidence,
    model: ModelInfo,
) -> tuple[str, ...]:
    note = f"; {row['note']}" if row and row.get("note") else ""
    paper_p_n = None if row is None else row.get("p_n")
    return (
        paper["kind"],
        LAYER_NAMES.get(ev.layer, ev.layer),
        weights,
        f"{paper['model']}; {paper['data']}{note}",
        f"{paper['n']} / {paper['d']}",
        _number(paper_p_n),
        _number(None if row is None else row.get("p_d")),
        f"{model.name} ({model.model_id}); {model.data_source}",
        f"{ev.n} / {ev.d}",
        _number(ev.kruskal_p_n),
        _number(ev.general_position_p_d),
        "—" if ev.kruskal_rank_estimate is None else str(ev.kruskal_rank_estimate),
        reading(
            paper_p_n,
            ev.kruskal_p_n,
            paper["n"],
            ev.n,
            paper["differs"],
            model.input_audit,
            None if row is None else row.get("p_d"),
            ev.general_position_p_d,
        ),
    )


def _unmatched(paper: Mapping[str, Any], row: Mapping[str, Any]) -> tuple[str, ...]:
    layer = str(row["layer"])
    return (
        paper["kind"],
        LAYER_NAMES.get(layer, layer),
        row["weights"],
        f"{paper['model']}; {paper['data']}; {row.get('note', '')}".rstrip("; "),
        f"{paper['n']} / {paper['d']}",
        _number(row.get("p_n")),
        _number(row.get("p_d")),
        "not in this run",
        "—",
        "—",
        "—",
        "—",
        f"no {row['weights']} {paper['kind']} model here (configs/paper.yaml runs paper A's)",
    )
