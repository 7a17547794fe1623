"""The families beyond ViT, BERT and GPT-2 end to end: configs/test_families.yaml (a tiny T5's
encoder stack and a tiny Swin) through extract -> assumptions -> capacity -> report with the
Snakemake CLI, in a copy of the repository; the report's rows and the mechanism they name."""

import json

import pandas as pd
import pytest
from html_tags import parse
from workflow_copy import copy_workflow, run_snakemake

pytestmark = pytest.mark.slow

RELATIVE = "positions enter inside attention, as a relative bias"
LAYERS = {"t5-tiny": ["0", "1", "random_attention"],
          "swin-tiny": ["0", "1", "2", "3", "random_attention"]}  # fmt: skip


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The workflow's files copied (not results or caches), run once on the tiny config."""
    workdir = tmp_path_factory.mktemp("families") / "repo"
    copy_workflow(workdir)
    run_snakemake(workdir, "--cores", "2", "--configfile", "configs/test_families.yaml")
    return workdir, parse((workdir / "reports" / "report.html").read_text(encoding="utf-8"))


def test_every_layer_of_both_models_is_checked_and_reported(run):
    workdir, page = run
    summary = pd.read_csv(workdir / "results" / "assumptions" / "summary.csv", dtype={"layer": str})
    assert {m: sorted(g["layer"]) for m, g in summary.groupby("model")} == {
        m: sorted(layers) for m, layers in LAYERS.items()
    }
    swin = summary[summary["model"] == "swin-tiny"].set_index("layer")
    assert swin["n"].tolist() == [16] * 5  # a 4 x 4 window at both stages
    assert swin.loc[["0", "1", "2", "3", "random_attention"], "d"].tolist() == [16, 16, 16, 32, 16]
    cards = [a for t, a in page.tags if t == "details" and "card" in a.get("class", "").split()]
    assert len(cards) == len(summary)
    text = " ".join(page.text)
    assert "t5-tiny" in text and "swin-tiny" in text
    provenance = json.loads(
        (workdir / "results" / "extract" / "swin-tiny" / "1" / "provenance.json").read_text()
    )
    assert provenance["window"]["shifted"] and provenance["window"]["read_by"] == 2
    assert [stage["d"] for stage in provenance["stages"]] == [16, 32]


def test_t5_layer_0_names_positions_inside_attention(run):
    workdir, page = run
    summary = pd.read_csv(workdir / "results" / "assumptions" / "summary.csv", dtype={"layer": str})
    t5 = summary[summary["model"] == "t5-tiny"].set_index("layer")
    # [CLS] A [SEP] B [SEP]: the two [SEP] tokens give equal rows at layer 0 of every example
    assert t5.loc["0", "context_outcome"] == "does not apply"
    assert RELATIVE in t5.loc["0", "structural"]
    assert pd.isna(t5.loc["1", "structural"]) or RELATIVE not in t5.loc["1", "structural"]
    failures = pd.read_csv(
        workdir / "results" / "assumptions" / "jobs" / "t5-tiny" / "0" / "failures.csv"
    )
    contexts = failures[failures["check"] == "context"]
    assert len(contexts) == 48 and (contexts["mechanism"] == f"repeated rows: repeated tokens "
                                     f"({RELATIVE})").all()  # fmt: skip
    capacity = pd.read_csv(workdir / "results" / "capacity" / "real.csv", dtype={"layer": str})
    shared = capacity[(capacity["model"] == "t5-tiny") & (capacity["contexts"] == "shared")]
    layer0 = shared[shared["layer"] == "0"]
    assert (layer0["shared_distinct_rows"] < 16).all()
    assert layer0["reading"].str.contains("Assumption 2 fails on it").all()
    assert layer0["reading"].str.contains(RELATIVE).all()
    assert (layer0["certified"] <= layer0["distinct_bound"]).all()
    assert RELATIVE in " ".join(page.text)
