"""The "paper A reported / this run" comparison: paper A's real-data results beside ours.

Paper A's values live in ``paper_a_real.yaml`` beside this module (with their source); this
module only matches them to this run's model × layer rows (by family, random or pretrained
weights, and layer) and reads each pair in a few words. The table holds one line per kind ×
layer × weights × model; the models and data sets behind each kind, and paper A's remarks
on single rows, are numbered notes the rows point to, so each description is written once.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from memcap.assumptions.verdicts import LayerEvidence
from memcap.extract.config import FAMILY_KINDS
from memcap.report.context import Comparison, Table
from memcap.report.loaders import ModelInfo, layer_order, layer_ranges

PAPER_A_FILE = Path(__file__).with_name("paper_a_real.yaml")
LAYER_NAMES = {"0": "embeddings", "1": "block 1", "random_attention": "random attention"}
COLUMNS = (
    "kind",
    "layer",
    "weights",
    "this run's model",
    "n: paper / ours",
    "paper P(n)",
    "our P(n), paper A's rule",
    "paper P(d)",
    "our P(d), paper A's rule",
    "our Kruskal estimate, paper A's rule",
    "reading",
    "our outcome at n (equilibrated)",
    "notes",
)
NOT_IN_RUN = "not in this run"


@lru_cache(maxsize=1)
def paper_a_values(path: str | Path = PAPER_A_FILE) -> dict[str, Any]:
    """Paper A's real-data values, keyed by family kind (vit, encoder, decoder)."""
    return yaml.safe_load(Path(path).read_text())


def weights_class(model: ModelInfo) -> str:
    """``random`` or ``pretrained`` (any loaded checkpoint counts as pretrained)."""
    return "random" if model.weights_source.lower().startswith("random") else "pretrained"


def _same(paper: float, ours: float) -> bool:
    """Both say "every sampled subset independent" (P = 1) or both do not (P < 1): the
    criterion the outcomes use."""
    return (paper >= 1.0) == (ours >= 1.0)


def reading(
    paper_p: float | None,
    ours: float,
    paper_p_d: float | None = None,
    ours_p_d: float = math.nan,
) -> str:
    """A few words: does this run agree with paper A at k = n, and at k = d when both measured."""
    if paper_p is None:
        return "not in paper A"
    if math.isnan(ours):
        return "not measured here (T < n)"
    at_n = _same(paper_p, ours)
    if paper_p_d is None or math.isnan(ours_p_d):
        return "agrees at n" if at_n else "differs at n"
    at_d = _same(paper_p_d, ours_p_d)
    if at_n and at_d:
        return "agrees"
    if not at_n and not at_d:
        return "differs at n and d"
    return "agrees at n, differs at d" if at_n else "differs at n, agrees at d"


def _key(kinds: Sequence[str], kind: str, weights: str, layer: str) -> tuple[Any, ...]:
    """Sort key: paper A's kind order, then layer, then random before pretrained."""
    return (list(kinds).index(kind), layer_order(layer), int(weights != "random"))


# A line of the table before its notes are numbered: its cells and the texts it cites.
_Line = tuple[tuple[str, ...], list[str]]


def _numbered(lines: Sequence[_Line]) -> tuple[tuple[tuple[str, ...], ...], list[str]]:
    """Number the notes in the order the lines first cite them; each line ends with its numbers."""
    texts: list[str] = []
    rows = []
    for cells, cited in lines:
        texts += [text for text in cited if text not in texts]
        rows.append(cells + (", ".join(str(texts.index(text) + 1) for text in cited),))
    return tuple(rows), texts


def comparison_table(
    evidence: Sequence[LayerEvidence],
    models: Mapping[str, ModelInfo],
    values: Mapping[str, Any] | None = None,
) -> Comparison | None:
    """One line per paper-A layer and per matching model × layer of this run.

    Paper rows with no model of this run get a line too; layers of this run beyond those paper
    A reported for the kind (the depth profiles' blocks) are named in one note, so nothing is
    silently dropped. None when no model of this run has a kind paper A reported.
    """
    values = values or paper_a_values()
    kinds = values["kinds"]
    keyed: list[tuple[tuple[Any, ...], _Line]] = []
    matched: set[tuple[str, str, str]] = set()
    beyond: dict[str, list[str]] = {}
    for ev in evidence:
        model = models.get(ev.model)
        family = FAMILY_KINDS.get(model.family, model.family) if model else None
        if family not in kinds:
            continue
        paper, weights = kinds[family], weights_class(model)
        if ev.layer not in {str(row["layer"]) for row in paper["rows"]}:
            beyond.setdefault(ev.model, []).append(ev.layer)
            continue
        row = _paper_row(paper, weights, ev.layer)
        if row is not None:
            matched.add((family, weights, ev.layer))
        key = _key(kinds, family, weights, ev.layer) + (ev.model,)
        keyed.append((key, _row(paper, row, weights, ev, model)))
    if not keyed:
        return None
    for family, paper in kinds.items():
        for row in paper["rows"]:
            if (family, row["weights"], str(row["layer"])) not in matched:
                key = _key(kinds, family, row["weights"], str(row["layer"])) + ("",)
                keyed.append((key, _unmatched(paper, row)))
    rows, texts = _numbered([line for _, line in sorted(keyed, key=lambda item: item[0])])
    if beyond:
        where = "; ".join(f"{m}: {layer_ranges(ls)}" for m, ls in beyond.items())
        texts.append(f"Layers of this run that paper A did not report (the depth strip at the top "
                     f"shows them): {where}.")  # fmt: skip
    return Comparison(Table(COLUMNS, rows), tuple(texts))


def _paper_row(paper: Mapping[str, Any], weights: str, layer: str) -> dict[str, Any] | None:
    for row in paper["rows"]:
        if row["weights"] == weights and str(row["layer"]) == layer:
            return row
    return None


def _number(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:.4g}"


def _kind_note(paper: Mapping[str, Any]) -> str:
    """Paper A's model and data of a kind, and why this run's P(n) may differ."""
    return (
        f"{paper['kind']}, paper A: {paper['model']}; {paper['data']}; n = {paper['n']}, "
        f"d = {paper['d']}. Where P(n) differs, the likely reason: {paper['differs'].strip()}."
    )


def _model_note(model: ModelInfo, ev: LayerEvidence) -> str:
    """This run's model and data (and its input audit when inputs are duplicated)."""
    audit = f"; {model.input_audit}" if _duplicated(model) else ""
    return f"{model.name}: {model.model_id}; {model.data_source}; n = {ev.n}, d = {ev.d}{audit}."


def _duplicated(model: ModelInfo) -> bool:
    return model.input_audit.startswith("inputs duplicated")


def _row(
    paper: Mapping[str, Any],
    row: Mapping[str, Any] | None,
    weights: str,
    ev: LayerEvidence,
    model: ModelInfo,
) -> _Line:
    cited = [_kind_note(paper), _model_note(model, ev)]
    if row and row.get("note"):
        cited.append(_row_note(paper, row))
    paper_p_n = None if row is None else row.get("p_n")
    paper_p_d = None if row is None else row.get("p_d")
    raw = {  # paper A's rule on this run's values: like with like
        "p_n": ev.paper_a.get("p_n", ev.kruskal_p_n),
        "p_d": ev.paper_a.get("p_d", ev.general_position_p_d),
        "estimate": ev.paper_a.get("estimate", ev.kruskal_rank_estimate),
    }
    text = reading(paper_p_n, raw["p_n"], paper_p_d, raw["p_d"])
    if text.startswith("differs") and _duplicated(model):
        text += " (inputs duplicated)"
    cells = (
        paper["kind"],
        LAYER_NAMES.get(ev.layer, ev.layer),
        weights,
        model.name,
        f"{paper['n']} / {ev.n}",
        _number(paper_p_n),
        _number(raw["p_n"]),
        _number(paper_p_d),
        _number(raw["p_d"]),
        "—" if raw["estimate"] is None else str(int(raw["estimate"])),
        text,
        ev.kruskal_outcome_n.value if ev.kruskal_outcome_n else "—",
    )
    return cells, cited


def _row_note(paper: Mapping[str, Any], row: Mapping[str, Any]) -> str:
    layer = LAYER_NAMES.get(str(row["layer"]), str(row["layer"]))
    return f"Paper A, {row['weights']} {paper['kind']}, {layer}: {row['note']}."


def _unmatched(paper: Mapping[str, Any], row: Mapping[str, Any]) -> _Line:
    layer = str(row["layer"])
    cited = [_kind_note(paper)] + ([_row_note(paper, row)] if row.get("note") else [])
    cells = (
        paper["kind"],
        LAYER_NAMES.get(layer, layer),
        row["weights"],
        NOT_IN_RUN,
        f"{paper['n']} / —",
        _number(row.get("p_n")),
        "—",
        _number(row.get("p_d")),
        "—",
        "—",
        "—",
        "—",
    )
    return cells, cited


def scale_gaps(model: ModelInfo, values: Mapping[str, Any] | None = None) -> list[str]:
    """How a model of this run differs in scale from paper A's of its kind, one phrase each:
    the model it stands in for, quantized weights, n and T below the paper's ([] for a kind
    paper A did not report)."""
    kinds = (values or paper_a_values())["kinds"]
    paper = kinds.get(FAMILY_KINDS.get(model.family, model.family))
    if paper is None:
        return []
    gaps = [f"stands in for {model.stands_in_for}"] if model.stands_in_for else []
    quantized = re.search(r"\.(Q(\d+)_\w+)\.gguf", model.weights_origin or "")
    if quantized:
        gaps.append(f"{quantized[2]}-bit weights ({quantized[1]} GGUF, dequantized to float32)")
    for size, ours, theirs in (("n", model.n, paper["n"]), ("T", model.T, paper["T"])):
        if ours < theirs:
            gaps.append(f"{size} = {ours:,} against paper A's {theirs:,}")
    return gaps
