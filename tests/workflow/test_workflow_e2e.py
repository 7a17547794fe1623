"""THE end-to-end test: the whole pipeline on the tiny config, then its report, checked.

Runs `snakemake --cores 2` through the CLI in a copy of the repository (so results, logs and
.snakemake never touch the checkout), on configs/test.yaml with a report title holding markup,
then parses reports/report.html: every section, every stage figure embedded as a data URI,
nothing external, the title shown as text. Also builds Snakemake's own report
(`snakemake --report`) and, where Chromium is available, opens the page in it.
"""

import base64
import json
import shutil
import time
import zipfile
from pathlib import Path

import pandas as pd
import pytest
import yaml
from html_tags import parse
from workflow_copy import copy_workflow, run_snakemake

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EVIL_TITLE = "memcap e2e <script>alert('x')</script>"
SECTIONS = (
    "at-a-glance",
    "run-summary",
    "assumptions",
    "paper-a",
    "paper-b",
    "limitations",
    "method",
)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The tiny pipeline run, once for the module; its wall time is printed."""
    workdir = tmp_path_factory.mktemp("e2e") / "repo"
    copy_workflow(workdir)
    config = yaml.safe_load((ROOT / "configs" / "test.yaml").read_text())
    config["report"] = {**(config.get("report") or {}), "title": EVIL_TITLE}
    (workdir / "configs" / "e2e.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    start = time.perf_counter()
    run_snakemake(workdir, "--cores", "2", "--configfile", "configs/e2e.yaml")
    print(f"\npipeline on the tiny config: {time.perf_counter() - start:.0f} s wall (2 cores)")
    html = (workdir / "reports" / "report.html").read_text(encoding="utf-8")
    return workdir, html, parse(html)


def test_every_section_is_present(run):
    _, _, page = run
    ids = {attrs.get("id") for _, attrs in page.tags}
    assert set(SECTIONS) <= ids
    text = " ".join(page.text)
    for heading in ("Run summary", "Run costs", "Library versions", "Limitations"):
        assert heading in text
    assert "Resolved configuration" in text and "details" in {t for t, _ in page.tags}


def test_one_verdict_card_per_model_and_layer(run):
    workdir, _, page = run
    summary = pd.read_csv(workdir / "results" / "assumptions" / "summary.csv")
    # Collapsed cards: <details class="card">, summary line model · layer · verdict.
    cards = [a for t, a in page.tags if t == "details" and "card" in a.get("class", "").split()]
    assert len(cards) == len(summary) > 0
    badges = [a for t, a in page.tags if t == "span" and "badge" in a.get("class", "")]
    # Per layer: three checks and Theorem 1 in the glance table, three in the card.
    assert len(badges) >= 7 * len(summary)
    text = " ".join(page.text)
    for model in summary["model"].unique():
        assert model in text


def test_the_tiny_run_exercises_every_outcome_and_names_failing_examples(run):
    workdir, _, page = run
    summary = pd.read_csv(workdir / "results" / "assumptions" / "summary.csv")
    outcomes = set(
        summary[["context_outcome", "kruskal_outcome", "general_position_outcome"]].stack()
    )
    assert {"applies", "does not apply", "too close to call"} <= outcomes
    # no check that fails or is too close to call is left without its mechanism
    for prefix in ("context", "kruskal", "general_position"):
        open_rows = summary[f"{prefix}_outcome"].isin(["does not apply", "too close to call"])
        named = summary[f"{prefix}_mechanism"].astype(object).fillna("").str.len() > 0
        assert (named | ~open_rows).all(), summary.loc[open_rows & ~named, ["model", "layer"]]
    # The strip shows Theorem 1's outcome of every layer (the tiny models' layers apply or fail;
    # "too close to call" comes from general position here) and every outcome has its badge.
    slug = {"applies": "applies", "does not apply": "fails", "too close to call": "close"}
    cells = [a.get("class") for t, a in page.tags if t == "a" and "cell" in a.get("class", "")]
    assert sorted(cells) == sorted(f"cell {slug[o]}" for o in summary["theorem1_outcome"])
    assert {"cell applies", "cell fails"} <= set(cells)
    badges = {a.get("class") for t, a in page.tags if t == "span" and "badge" in a.get("class", "")}
    assert {f"badge {slug[o]}" for o in outcomes} <= badges
    # the class token at layer 0: one vector for every input, named as such per example
    vit0 = summary[(summary["model"] == "vit-tiny") & (summary["layer"].astype(str) == "0")]
    structural = vit0["structural"].iloc[0]
    assert "identical queries" in structural and "does not depend on the input" in structural
    failures = pd.read_csv(
        workdir / "results" / "assumptions" / "jobs" / "vit-tiny" / "0" / "failures.csv"
    )
    assert len(failures) == int(vit0["T"].iloc[0]) - 1
    assert failures["input"].str.contains("photograph").all()  # the image and its crops
    assert "failing examples" in " ".join(page.text)


def test_every_stage_figure_is_embedded(run):
    workdir, _, page = run
    sources = [a["src"] for t, a in page.tags if t == "img"]
    assert all(src.startswith("data:image/png;base64,") for src in sources)
    embedded = {base64.b64decode(src.split(",", 1)[1]) for src in sources}
    figures = sorted((workdir / "results").rglob("*.png"))
    assert len(figures) >= 20
    missing = [str(p.relative_to(workdir)) for p in figures if p.read_bytes() not in embedded]
    assert not missing, missing
    assert len(sources) == len(figures)


def test_nothing_external(run):
    _, html, page = run
    for tag, attrs in page.tags:
        for name in ("src", "href"):
            value = attrs.get(name)
            if value is not None:
                assert value.startswith(("data:", "#")), (tag, name, value[:80])
    assert "<link" not in html and "@import" not in html and "url(" not in html


def test_config_text_is_escaped(run):
    _, html, page = run
    assert "<script>" not in html
    assert "script" not in {tag for tag, _ in page.tags}
    assert EVIL_TITLE in " ".join(page.text)


def test_snakemake_report_has_every_figure_with_caption_and_category(run):
    workdir, _, _ = run
    run_snakemake(workdir, "--configfile", "configs/e2e.yaml", "--report", "smk_report.zip")
    with zipfile.ZipFile(workdir / "smk_report.zip") as archive:
        index = archive.read("smk_report/report.html").decode("utf-8")
    decoder = json.JSONDecoder()
    results = decoder.raw_decode(index[index.index("results = {") + len("results = ") :])[0]
    categories = decoder.raw_decode(index[index.index("categories = {") + len("categories = ") :])[
        0
    ]
    listed = {path for sub in categories.values() for paths in sub.values() for path in paths}
    for figure in sorted((workdir / "results").rglob("*.png")):
        key = figure.relative_to(workdir).as_posix()
        assert key in results, f"{key} is not a report item"
        assert results[key]["caption"].strip(), f"{key} has no caption"
        assert key in listed, f"{key} has no category"
    assert "reports/report.html" in results


@pytest.mark.browser
def test_page_renders_in_chromium(run, tmp_path):
    from browser import assert_figures_rendered, open_in_browser

    workdir, _, page = run
    result = open_in_browser(workdir / "reports" / "report.html", tmp_path)
    assert_figures_rendered(result, sum(1 for tag, _ in page.tags if tag == "img"))
    shutil.copy(result["screenshot"], workdir / "reports" / "screenshot.png")


def test_depth_rows_have_a_profile_and_no_contexts(run):
    workdir, _, page = run
    results = workdir / "results"
    table = pd.read_csv(results / "assumptions" / "bert-tiny" / "depth.csv", dtype={"layer": str})
    assert list(table["layer"]) == ["0", "1", "2", "3", "random_attention"]
    assert list(table["role"]) == ["detail", "detail", "depth", "depth", "detail"]
    assert (results / "assumptions" / "bert-tiny" / "depth_profiles.csv").exists()
    for layer in ("2", "3"):  # depth rows: queries, ranks, provenance, no contexts
        assert (results / "extract" / "bert-tiny" / layer / "queries.npy").exists()
        assert not (results / "extract" / "bert-tiny" / layer / "contexts.npy").exists()
    assert (results / "extract" / "bert-tiny" / "1" / "contexts.npy").exists()
    summary = pd.read_csv(results / "assumptions" / "summary.csv", dtype={"layer": str})
    assert set(summary[summary["model"] == "bert-tiny"]["layer"]) == set(table["layer"])
    text = " ".join(page.text)
    assert "Where Theorem 1 applies, layer by layer" in text and "Depth profiles" in text
