"""memcap.assumptions.job: one model's checks, from its extraction folder into its own."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
from snakemake.utils import validate

from memcap.assumptions.job import check_model
from memcap.extract.store import ExtractOutputs
from memcap.numerics import context_ranks, save_context_ranks

ROOT = Path(__file__).resolve().parents[2]
T, N, D = 40, 6, 16
DETAIL_FILES = {
    "context_rank.csv",
    "context_rank.json",
    "context_rank.png",
    "kruskal_profile.csv",
    "kruskal.json",
    "kruskal_profile.png",
    "failures.csv",
}


def _extraction(root: Path, detail: list[str], depth_rows: list[str]) -> None:
    """What extract_model writes: layer 0 has one query for every example (Kruskal rank 1),
    the other layers Gaussian queries; depth rows store no contexts."""
    rng = np.random.default_rng(0)
    for layer in detail + depth_rows:
        files = ExtractOutputs.in_folder(root, layer, contexts=layer in detail)
        files.queries.parent.mkdir(parents=True)
        queries = rng.standard_normal((T, D)).astype(np.float32)
        if layer == "0":
            queries[:] = queries[0]
        np.save(files.queries, queries)
        contexts = rng.standard_normal((T, N, D)).astype(np.float32)
        if files.contexts is not None:
            np.save(files.contexts, contexts)
        save_context_ranks(files.context_ranks, context_ranks(contexts))
        record = {"model": "tiny", "layer": layer, "T": T, "n": N, "d": D, "warnings": []}
        files.provenance.write_text(json.dumps(record))


def _section() -> dict:
    config = {"assumptions": {"samples": 32, "depth_samples": 8}}
    validate(config, str(ROOT / "workflow" / "schemas" / "config.schema.yaml"))
    return config["assumptions"] | {"seed": 0}


def test_detail_layers_get_their_files_and_depth_rows_only_their_row(tmp_path):
    extraction, out = tmp_path / "extract" / "tiny", tmp_path / "assumptions" / "tiny"
    _extraction(extraction, detail=["0", "1"], depth_rows=["2"])
    section = _section()
    check_model("tiny", extraction, out, ["0", "1", "2"], ["0", "1"], section, True, device="cpu")
    assert {p.name for p in out.iterdir()} == {
        "0", "1", "depth.csv", "depth_profiles.csv", "depth.png",
    }  # fmt: skip
    # Gaussian 16 x 16 subsets are at times ill-conditioned beyond float32's tolerance.
    for layer, low, high in (("0", 1, 1), ("1", D - 1, D)):
        assert {p.name for p in (out / layer).iterdir()} == DETAIL_FILES
        kruskal = json.loads((out / layer / "kruskal.json").read_text())
        assert (kruskal["model"], kruskal["layer"], kruskal["samples"]) == ("tiny", layer, 32)
        assert low <= kruskal["estimate"] <= high  # each layer's own queries were checked
        assert kruskal["settings"] == section
        assert kruskal["inputs"] == [str(extraction / layer / "queries.npy")]
        context = json.loads((out / layer / "context_rank.json").read_text())
        assert context["inputs"] == [str(extraction / layer / "context_ranks.npz")]
        assert context["full_rank_frac"] == 1.0
    table = pd.read_csv(out / "depth.csv", dtype={"layer": str})
    assert list(table["layer"]) == ["0", "1", "2"]
    assert list(table["role"]) == ["detail", "detail", "depth"]
    assert list(table["samples"]) == [32, 32, 8]
    profiles = pd.read_csv(out / "depth_profiles.csv", dtype={"layer": str})
    assert set(profiles["layer"]) == {"2"} and len(profiles) == D


def test_no_depth_profile_writes_only_the_detail_layers(tmp_path):
    extraction, out = tmp_path / "extract" / "tiny", tmp_path / "out"
    _extraction(extraction, detail=["1"], depth_rows=[])
    check_model("tiny", extraction, out, ["1"], ["1"], _section(), False, device="cpu")
    assert [p.name for p in out.iterdir()] == ["1"]
