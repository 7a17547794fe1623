"""The scale audit end to end on the CPU: configs/scale.yaml's models shrunk to tiny sizes
(same config classes, timm name, bfloat16, every block), run through Snakemake's extraction,
checks and certified capacity, then benchmarks/gpu_scale_audit.py reads the run."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from tiny_sizes import SIZES

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def tiny_scale_config() -> dict:
    """configs/scale.yaml with tiny architectures and data, on the CPU."""
    config = copy.deepcopy(yaml.safe_load((ROOT / "configs" / "scale.yaml").read_text()))
    config["device"] = "cpu"
    config["extract"]["batch_size"] = 16
    for entry in config["extract"]["models"]:
        entry["model_kwargs"] = SIZES[entry["model"]]
        entry["data"]["T"] = 48
        if entry["family"] != "vit":
            entry["n"] = 16
    # one check job per model, as gpu_scale_audit.snakemake_command runs them (its log is read)
    config["assumptions"] |= {"samples": 40, "depth_samples": 20, "cut": "model"}
    config["capacity"] |= {"max_H": 2, "max_T": 32}
    config["report"] = {"enabled": False}
    return config


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The tiny scale run and the audit's JSON of it."""
    workdir = tmp_path_factory.mktemp("scale")
    configfile = workdir / "scale-tiny.yaml"
    configfile.write_text(yaml.safe_dump(tiny_scale_config()))
    command = [str(BIN / "snakemake"), "-s", str(ROOT / "Snakefile"), "-d", str(workdir)]
    done = subprocess.run(
        [*command, "--cores", "2", "--configfile", str(configfile)],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    out = workdir / "audit.json"
    audit = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_scale_audit.py")]
        + ["--config", str(configfile), "--root", str(workdir), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert audit.returncode == 0, audit.stderr[-3000:]
    return workdir, json.loads(out.read_text())


def test_every_block_is_extracted_in_bfloat16_on_the_cpu(run):
    workdir, _ = run
    for name in ("gpt2-large-random", "llama-7b-random", "vit-l16-random"):
        for layer in ("0", "1", "2", "3", "random_attention"):
            folder = workdir / "results" / "extract" / name / layer
            record = json.loads((folder / "provenance.json").read_text())
            assert record["precision"] == "bfloat16" and record["device"] == "cpu"
            assert "drawn on cpu" in record["weights_source"]
            assert record["peak_gpu_memory_gb"] is None
            queries = np.load(folder / "queries.npy")
            assert queries.dtype == np.float32 and np.isfinite(queries).all()
            assert queries.shape == (48, 32)
            assert (folder / "contexts.npy").exists() == (layer in ("0", "1", "random_attention"))


def test_the_audit_records_sizes_and_seconds_of_every_model(run):
    _, audit = run
    assert set(audit["models"]) == {"gpt2-large-random", "llama-7b-random", "vit-l16-random"}
    for name, row in audit["models"].items():
        assert row["device"] == "cpu" and len(row["commit"]) == 40 and row["status"] == "complete"
        assert row["windows_per_second"] == pytest.approx(48 / row["extract_seconds"], rel=0.01)
        assert row["checked_layers"] == 5 and row["extract_progress"].startswith("48/48")
        assert (row["d"], row["blocks"], row["layers"], row["T"], row["S"]) == (32, 3, 5, 48, 40)
        assert row["n"] == (17 if name.startswith("vit") else 16)
        assert row["params"] > 0 and row["precision"] == "bfloat16"
        for stage in ("extract", "check", "capacity"):
            assert row[f"{stage}_seconds"] > 0, (name, stage)
        assert 0 < row["context_rank_seconds"] < row["extract_seconds"]
        assert 0 < row["kruskal_seconds"] < row["check_seconds"]
        stages = row["extract_seconds"] + row["check_seconds"] + row["capacity_seconds"]
        assert row["total_seconds"] == pytest.approx(stages, abs=0.02)
        assert row["peak_gpu_memory_gb"] is None
