"""memcap.assumptions.job and .cut: a check job's layers, from its model's extraction folder
into their folders, under either cut, and a model's depth profile from those."""

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
from snakemake.utils import validate

from memcap.assumptions.cut import job_ids, job_pattern, layer_folders, parse_job
from memcap.assumptions.job import DEPTH_PART, check_layers, write_depth_profile
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


def _depth(folders: list[Path], out: Path) -> pd.DataFrame:
    """The depth profile of the layers in ``folders`` into ``out``; its table."""
    out.mkdir(parents=True)
    names = [out / name for name in ("depth.csv", "depth_profiles.csv", "depth.png")]
    write_depth_profile("tiny", folders, *names)
    return pd.read_csv(out / "depth.csv", dtype={"layer": str})


def test_detail_layers_get_their_files_and_depth_rows_only_their_part(tmp_path):
    extraction, out = tmp_path / "extract" / "tiny", tmp_path / "jobs" / "tiny"
    _extraction(extraction, detail=["0", "1"], depth_rows=["2"])
    section, layers = _section(), ["0", "1", "2"]
    folders = layer_folders("tiny", out, layers)
    check_layers("tiny", extraction, folders, ["0", "1"], section, device="cpu")
    assert {p.name for p in out.iterdir()} == set(layers)
    assert {p.name for p in (out / "2").iterdir()} == {DEPTH_PART}
    # Gaussian 16 x 16 subsets are at times ill-conditioned beyond float32's tolerance.
    for layer, low, high in (("0", 1, 1), ("1", D - 1, D)):
        assert {p.name for p in (out / layer).iterdir()} == DETAIL_FILES | {DEPTH_PART}
        kruskal = json.loads((out / layer / "kruskal.json").read_text())
        assert (kruskal["model"], kruskal["layer"], kruskal["samples"]) == ("tiny", layer, 32)
        assert low <= kruskal["estimate"] <= high  # each layer's own queries were checked
        assert kruskal["settings"] == section
        assert kruskal["inputs"] == [str(extraction / layer / "queries.npy")]
        context = json.loads((out / layer / "context_rank.json").read_text())
        assert context["inputs"] == [str(extraction / layer / "context_ranks.npz")]
        assert context["full_rank_frac"] == 1.0
    table = _depth(list(folders.values()), tmp_path / "depth")
    assert list(table["layer"]) == ["0", "1", "2"]
    assert list(table["role"]) == ["detail", "detail", "depth"]
    assert list(table["samples"]) == [32, 32, 8]
    profiles = pd.read_csv(tmp_path / "depth" / "depth_profiles.csv", dtype={"layer": str})
    assert set(profiles["layer"]) == {"2"} and len(profiles) == D
    assert (tmp_path / "depth" / "depth.png").stat().st_size > 1000


def test_layer_jobs_write_the_model_jobs_files(tmp_path):
    """assumptions.cut: layer - one job per layer, its folder the layer's - writes the files of
    the model's job, every CSV byte for byte, and the same depth profile but the search's wall
    time."""
    extraction = tmp_path / "extract" / "tiny"
    _extraction(extraction, detail=["0", "1"], depth_rows=["2"])
    section, layers = _section(), ["0", "1", "2"]
    whole = tmp_path / "model" / "tiny"
    check_layers(
        "tiny", extraction, layer_folders("tiny", whole, layers), ["0", "1"], section, "cpu"
    )
    apart = tmp_path / "layers" / "tiny"
    for layer in reversed(layers):  # the order the jobs run in does not matter
        job = f"tiny/{layer}"
        folders = layer_folders(job, apart / layer, layers)
        assert folders == {layer: apart / layer}
        check_layers("tiny", extraction, folders, ["0", "1"], section, "cpu")
    names = sorted(p.relative_to(whole) for p in whole.rglob("*"))
    assert sorted(p.relative_to(apart) for p in apart.rglob("*")) == names
    tables = [name for name in names if name.suffix == ".csv"]
    assert len(tables) == 6  # three a detail layer
    for name in tables:
        assert (apart / name).read_bytes() == (whole / name).read_bytes(), name
    depth = {
        where: _depth([root / layer for layer in layers], tmp_path / "depth" / where)
        for where, root in (("whole", whole), ("apart", apart))
    }
    for name in ("depth.csv", "depth_profiles.csv"):
        whole_csv, apart_csv = (pd.read_csv(tmp_path / "depth" / w / name) for w in depth)
        if "kruskal_seconds" in whole_csv:  # a timing: it differs between any two runs
            whole_csv, apart_csv = (
                t.drop(columns="kruskal_seconds") for t in (whole_csv, apart_csv)
            )
        pd.testing.assert_frame_equal(apart_csv, whole_csv, check_exact=True)


def test_a_job_id_names_a_model_or_one_of_its_layers():
    layers = {"gpt2-small": ["0", "3", "random_attention"], "vit.b": ["1"]}
    assert job_ids("model", layers) == ["gpt2-small", "vit.b"]
    ids = job_ids("layer", layers)
    assert ids == ["gpt2-small/0", "gpt2-small/3", "gpt2-small/random_attention", "vit.b/1"]
    assert [parse_job(job) for job in ("vit.b", "vit.b/1")] == [("vit.b", None), ("vit.b", "1")]
    pattern = job_pattern(r"gpt2\-small|vit\.b")
    assert all(re.fullmatch(pattern, job) for job in ids + ["vit.b"])
    assert not any(re.fullmatch(pattern, job) for job in ("gpt2", "vit.b/1/x", "vit.b/"))
    assert layer_folders("vit.b", "jobs/vit.b", ["1"]) == {"1": Path("jobs/vit.b/1")}
