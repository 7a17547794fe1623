"""The "paper A reported / this run" table and its data file."""

from __future__ import annotations

import math
from pathlib import Path

from memcap.assumptions.verdicts import LayerEvidence, Outcome
from memcap.report.loaders import ModelInfo
from memcap.report.paper_a import comparison_table, paper_a_values, reading


def test_paper_a_file_holds_the_published_values_with_their_source():
    values = paper_a_values()
    assert "notebooks" in values["source"]
    vit = values["kinds"]["vit"]
    assert (vit["n"], vit["d"]) == (197, 768) and "ImageNet" in vit["data"]
    rows = {(r["weights"], str(r["layer"])): r for r in vit["rows"]}
    assert rows[("random", "1")]["p_n"] == 1.0 and rows[("random", "0")]["p_n"] == 0.0
    assert rows[("random", "random_attention")]["p_n"] == 1.0
    assert rows[("pretrained", "1")]["p_n"] == 0.9982
    assert values["kinds"]["encoder"]["n"] == 512 and values["kinds"]["decoder"]["d"] == 1280
    assert {v["kind"] for v in values["kinds"].values()} == {"vision", "encoder", "decoder"}


def test_reading_agrees_or_differs_at_n_and_d():
    # one criterion, the outcomes' own: P = 1 (every sampled subset independent) or P < 1
    assert reading(1.0, 1.0) == "agrees at n"
    assert reading(1.0, 0.995) == "differs at n"
    assert reading(0.9982, 0.2) == "agrees at n"
    assert reading(1.0, 0.0) == "differs at n"
    assert reading(1.0, 1.0, paper_p_d=0.0, ours_p_d=0.0) == "agrees"
    assert reading(1.0, 1.0, paper_p_d=0.0, ours_p_d=1.0) == "agrees at n, differs at d"
    assert reading(0.0, 1.0, paper_p_d=0.0, ours_p_d=1.0) == "differs at n and d"
    assert reading(0.0, 1.0, paper_p_d=0.0, ours_p_d=0.0) == "differs at n, agrees at d"
    assert reading(0.5, 0.5) == "agrees at n"  # both below 1
    assert reading(None, 1.0) == "not in paper A"
    assert reading(1.0, math.nan).startswith("not measured")


def evidence(model: str, layer: str, p_n: float) -> LayerEvidence:
    """A layer whose paper-A-rule P(n) is ``p_n``; equilibrated, every n-subset applies."""
    return LayerEvidence(
        model, layer, 800, 197, 768, 500, 1.0, 1.0, 0.0, 190,
        kruskal_outcome_n=Outcome.APPLIES,
        paper_a={"p_n": p_n, "p_d": 0.0, "estimate": 150 if p_n < 1 else 300},
    )  # fmt: skip


def _model(name: str, family: str, weights: str, audit: str) -> ModelInfo:
    return ModelInfo(
        name, family, f"{name}_id", weights, "c", "builtin: 19 photos", 800, 197, 768,
        ("0", "1", "2", "3"), input_audit=audit,
    )  # fmt: skip


def test_comparison_table_one_line_per_layer_descriptions_once_as_notes():
    models = {
        "v": _model("v", "vit", "random (timm init, seed 0)", "inputs distinct: 0 identical"),
        "w": _model("w", "vit", "package:x.onnx", "inputs duplicated: 3 identical"),
    }
    comparison = comparison_table(
        [evidence("v", "1", 0.2), evidence("v", "random_attention", 1.0),
         evidence("w", "1", 1.0), evidence("w", "2", 1.0), evidence("w", "3", 1.0)],
        models,
    )  # fmt: skip
    table, notes = comparison.table, comparison.notes
    rows = {(r[0], r[1], r[2], r[3]): dict(zip(table.columns, r, strict=True)) for r in table.rows}
    block = rows[("vision", "block 1", "random", "v")]
    # paper A's values beside this run's by paper A's own rule (the stored values), not beside
    # the equilibrated P(n) = 1; the equilibrated outcome has its own column
    assert block["reading"] == "differs at n, agrees at d"
    assert (block["paper P(n)"], block["our P(n), paper A's rule"]) == ("1", "0.2")
    assert (block["paper P(d)"], block["our P(d), paper A's rule"]) == ("0", "0")
    assert block["our Kruskal estimate, paper A's rule"] == "150"
    assert block["our outcome at n (equilibrated)"] == "applies"
    assert block["n: paper / ours"] == "197 / 197"
    assert rows[("vision", "random attention", "random", "v")]["reading"] == "agrees"
    pretrained = rows[("vision", "block 1", "pretrained", "w")]  # paper A: P(n) = 0.9982 < 1
    assert pretrained["reading"].startswith("differs at n")
    assert pretrained["reading"].endswith("(inputs duplicated)")
    missing = rows[("vision", "embeddings", "random", "not in this run")]
    assert missing["our P(n), paper A's rule"] == missing["our outcome at n (equilibrated)"] == "—"
    assert table.columns[-2:] == ("our outcome at n (equilibrated)", "notes")
    assert ("encoder", "block 1", "random", "not in this run") in rows  # paper rows without ours
    # Vision rows first, each layer's random before pretrained.
    assert [r[1] for r in table.rows[:3]] == ["embeddings", "block 1", "block 1"]
    # Paper A's data are described once, in a note every vision row cites.
    (vision,) = [i + 1 for i, n in enumerate(notes) if n.startswith("vision, paper A")]
    assert "ImageNet-1k" in notes[vision - 1] and "paper A's raw rule" in notes[vision - 1]
    assert "too few distinct scenes" not in notes[vision - 1]  # the same images decide applies
    assert all(str(vision) in r[-1].split(", ") for r in table.rows if r[0] == "vision")
    assert sum("ImageNet-1k" in n for n in notes) == 1
    assert any(n.startswith("w: w_id; builtin: 19 photos") and "duplicated" in n for n in notes)
    assert notes[-1].endswith("w: 2, 3.")  # layers paper A did not report: named, no rows
    assert len(table.rows) == len({r[:4] for r in table.rows})
    first_cited = list(dict.fromkeys(int(n) for r in table.rows for n in r[-1].split(", ")))
    assert first_cited == list(range(1, len(notes)))  # read top down; the last note has no row
    assert comparison_table([], models) is None


def test_without_paper_a_values_the_row_falls_back_to_the_deciding_values():
    models = {"v": _model("v", "vit", "random (timm init, seed 0)", "inputs distinct")}
    bare = LayerEvidence("v", "1", 800, 197, 768, 500, 1.0, 0.25, 0.0, 120)  # scaling none
    table = comparison_table([bare], models).table
    row = next(dict(zip(table.columns, r, strict=True)) for r in table.rows if r[3] == "v")
    assert row["our P(n), paper A's rule"] == "0.25"
    assert row["our Kruskal estimate, paper A's rule"] == "120"
    assert row["our outcome at n (equilibrated)"] == "—"


def test_report_page_shows_the_table_and_the_input_audit(tmp_path):
    import json

    from test_report_render import TEMPLATE, fabricate_run

    from memcap.report import build_context
    from memcap.report.render import render_html

    inputs = fabricate_run(tmp_path)
    audit = {
        "kind": "image",
        "examples": 64,
        "source_photographs": 12,
        "photographs_used": 12,
        "max_inputs_per_photograph": 6,
        "identical_images": 0,
        "overlapping_crops": 40,
        "near_identical_pairs": 2,
        "near_identical_cosine": 0.99,
        "max_pair_cosine": 0.995,
        "flat_inputs": 0,
    }
    for layer in inputs.layers:
        path = layer.provenance
        record = json.loads(Path(path).read_text())
        Path(path).write_text(json.dumps({**record, "input_audit": audit}))
    context = build_context(inputs)
    assert context.models[0].input_audit.startswith("inputs duplicated: 0 identical and 2")
    html = render_html(TEMPLATE, ctx=context)
    assert "Paper A reported / this run" in html and "ImageNet-1k" in html
    assert "input audit: inputs duplicated" in html  # in the layer cards
    # a failed audit limits the run; a passed one is a note of the run summary
    assert any(lim.text.startswith("input audit: inputs duplicated") for lim in context.limitations)
    assert not any("input audit" in note.text for note in context.run_notes)
    assert any("inputs duplicated" in note for note in context.paper_a_real.notes)
    assert "both are 1 (every sampled subset independent) or both are below 1" in html
    assert "our outcome at n (equilibrated)" in html
