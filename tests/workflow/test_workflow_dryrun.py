"""`snakemake -n` lists the jobs each shipped config implies."""

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
    model_layers = sum(len(entry.layers) for entry in entries)
    detail_layers = sum(len(entry.detail_layers) for entry in entries)
    profiled = sum(
        bool(entry.depth_rows) or sum(isinstance(x, int) for x in entry.layers) >= 3
        for entry in entries
    )
    counts = _job_counts(configfile)
    assert counts["extract_embeddings"] == model_layers
    # Contexts, full checks and certified capacity: the detail layers only.
    assert counts["extract_contexts"] == detail_layers < model_layers
    assert counts.get("take_depth_profile", 0) == profiled > 0
    assert counts["extract_model"] == len(config["extract"]["models"])  # one pass per model
    onnx_models = [m for m in config["extract"]["models"] if m.get("weights", "").endswith(".onnx")]
    assert counts.get("convert_onnx_weights", 0) == len(onnx_models)  # once per model
    # One check job and one certification job per model; moving a layer's files is local.
    assert counts["check_assumptions"] == len(entries)
    assert counts["certify_real_capacity"] == sum(bool(e.detail_layers) for e in entries)
    assert counts["take_layer_checks"] == counts["take_layer_capacity"] == detail_layers
    assert counts["run_synthetic_sweep"] == len(config["synthetic"]["sweeps"])
    assert counts["train_aot"] == 1  # every sweep in one process
    for rule in (
        "summarize_assumptions",
        "summarize_synthetic",
        "summarize_real_capacity",
        "summarize_aot",
        "plot_synthetic",
        "plot_aot",
        "render_report",
        "all",
    ):
        assert counts[rule] == 1, rule
