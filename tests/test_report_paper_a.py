"""The "paper A reported / this run" table and its data file."""

from __future__ import annotations

import math
from pathlib import Path

from memcap.report.loaders import ModelInfo
from memcap.report.paper_a import comparison_table, paper_a_values, reading
from memcap.report.verdicts import LayerEvidence


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


def test_reading_agrees_differs_and_names_the_reason():
    assert reading(1.0, 0.995, 197, 197, "few scenes", "inputs distinct: x").startswith("agrees")
    line = reading(1.0, 0.0, 197, 197, "few scenes", "inputs distinct: x")
    assert line.startswith("differs") and "few scenes" in line
    dup = reading(1.0, 0.5, 197, 197, "few scenes", "inputs duplicated: 3 identical")
    assert "inputs duplicated" in dup
    assert "at n = 64 here, 512 in paper A" in reading(0.0, 0.0, 512, 64, "", "")
    assert reading(None, 1.0, 1, 1, "", "") == "paper A did not report this layer"
    both = reading(1.0, 1.0, 197, 197, "", "", paper_p_d=0.0, ours_p_d=0.0)
    assert both == "agrees: P(n) = 1 vs 1; P(d) = 0 vs 0 (agrees)"
    assert reading(1.0, math.nan, 197, 197, "", "").startswith("not measured")


def evidence(model: str, layer: str, p_n: float) -> LayerEvidence:
    return LayerEvidence(model, layer, 800, 197, 768, 500, 1.0, p_n, 0.0, 150)


def test_comparison_table_matches_rows_and_lists_the_rest():
    models = {
        "v": ModelInfo(
            "v",
            "vit",
            "vit_base",
            "random (timm init, seed 0)",
            "c",
            "builtin: 19 photos",
            800,
            197,
            768,
            ("1",),
            input_audit="inputs distinct: 0 identical",
        ),
    }
    table = comparison_table(
        [evidence("v", "1", 0.2), evidence("v", "random_attention", 1.0)], models
    )
    rows = {(r[0], r[1], r[2]): r for r in table.rows}
    assert rows[("vision", "block 1", "random")][-1].startswith("differs")
    assert rows[("vision", "block 1", "random")][5] == "1"  # paper P(n)
    assert rows[("vision", "random attention", "random")][-1].startswith("agrees")
    assert rows[("vision", "block 1", "pretrained")][7] == "not in this run"
    assert ("encoder", "block 1", "random") in rows  # paper rows without a model of ours
    assert comparison_table([], models) is None


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
    vision = [row for row in context.paper_a_real.rows if row[0] == "vision"]
    assert any("inputs duplicated" in row[-1] for row in vision)  # the likely reason
