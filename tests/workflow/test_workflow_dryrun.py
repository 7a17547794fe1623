"""`snakemake -n` lists the jobs each shipped config implies."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from memcap.extract.depth import with_layers
from memcap.extract.entries import model_entries

ROOT = Path(__file__).resolve().parents[2]


def _job_counts(configfile: str) -> dict[str, int]:
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "snakemake"),
            "-n",
            "--forceall",
            "--configfile",
            configfile,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    table = result.stdout.split("Job stats:", 1)[1].split("total", 1)[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", table, re.M)}


@pytest.mark.parametrize("configfile", ["config.yaml", "configs/test.yaml"])
def test_dry_run_lists_the_expected_jobs(configfile, tmp_path):
    config = yaml.safe_load((ROOT / configfile).read_text())
    entries = [with_layers(entry) for entry in model_entries(config)]
    counts = _job_counts(configfile)
    # Jobs per model, per sweep or once: each writes the files its rule declares, every
    # layer of a model into the model's folder.
    assert counts["extract_model"] == len(config["extract"]["models"])  # one pass per model
    onnx_models = [m for m in config["extract"]["models"] if m.get("weights", "").endswith(".onnx")]
    assert counts.get("convert_onnx_weights", 0) == len(onnx_models)  # once per model
    assert counts["check_assumptions"] == len(entries)
    # Certified capacity: the models with a detail layer (depth rows store no contexts).
    assert counts["certify_real_capacity"] == sum(bool(e.detail_layers) for e in entries)
    assert counts["train_synthetic"] == len(config["synthetic"]["sweeps"])  # a job per sweep
    assert counts["train_aot"] == 1  # every sweep in one process
    real = config.get("real_memorization", {}).get("layers", [])
    # Real memorization: one job a model with a listed layer, and one summary.
    assert counts.get("train_real_memorization", 0) == len({e["model"] for e in real})
    assert counts.get("summarize_real_memorization", 0) == (1 if real else 0)
    once = (
        "summarize_assumptions",
        "summarize_synthetic",
        "summarize_real_capacity",
        "summarize_aot",
        "plot_synthetic",
        "plot_aot",
        "render_report",
        "all",
    )
    for rule in once:
        assert counts[rule] == 1, rule
    counted = ("extract_model", "convert_onnx_weights", "check_assumptions")
    counted += ("certify_real_capacity", "train_synthetic", "train_aot")
    counted += ("train_real_memorization", "summarize_real_memorization")
    assert set(counts) <= set(once + counted)  # no job per layer


@pytest.mark.parametrize("configfile", ["configs/families.yaml", "configs/test_families.yaml"])
def test_dry_run_of_the_families_configs_plans_their_chain_offline(configfile, tmp_path):
    """Flan-T5's encoder and Swin (hub ids, not cached) and their tiny stand-ins: one job per
    model and stage, without the network (an empty Hugging Face cache, offline)."""
    (tmp_path / "hf").mkdir()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    env["MEMCAP_CACHE_DIR"] = str(tmp_path / "memcap")
    result = subprocess.run(
        [str(Path(sys.executable).parent / "snakemake"), "-n", "--forceall"]
        + ["--configfile", configfile],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    table = result.stdout.split("Job stats:", 1)[1].split("total", 1)[0]
    counts = {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", table, re.M)}
    config = yaml.safe_load((ROOT / configfile).read_text())
    models = [m["name"] for m in config["extract"]["models"]]
    per_model = ("extract_model", "check_assumptions", "certify_real_capacity")
    assert {rule: counts.get(rule) for rule in per_model} == dict.fromkeys(per_model, 2)
    assert "train_synthetic" not in counts and "train_aot" not in counts  # switched off
    assert counts["render_report"] == 1
    for name in models:
        assert f"output: results/extract/{name}\n" in result.stdout, name
    families = {m["model"]: m["family"] for m in config["extract"]["models"]}
    assert set(families.values()) == {"encoder", "vit"}
