"""The extract rules through the Snakemake CLI (temporary working directory)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from memcap.extract.depth import with_layers
from memcap.extract.entries import model_entries
from memcap.extract.layer_spec import layer_name

ROOT = Path(__file__).resolve().parents[2]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")


def snakemake(workdir: Path, *args: str, env: dict[str, str] | None = None):
    command = [str(SNAKEMAKE), "-s", str(ROOT / "Snakefile"), "--directory", str(workdir)]
    return subprocess.run(
        [*command, *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=ROOT,
        timeout=300,
    )


def test_dry_run_plans_one_job_per_model_and_layer(tmp_path):
    result = snakemake(tmp_path, "-n", "--configfile", str(ROOT / "configs" / "test.yaml"))
    assert result.returncode == 0, result.stderr + result.stdout
    planned = set(re.findall(r"wildcards: model=([\w.-]+), layer=(\w+)", result.stdout))
    config = yaml.safe_load((ROOT / "configs" / "test.yaml").read_text())
    entries = [with_layers(entry) for entry in model_entries(config)]  # "all" resolved
    expected = {(entry.name, layer_name(layer)) for entry in entries for layer in entry.layers}
    assert expected <= planned
    extract_jobs = re.search(r"extract_embeddings\s+(\d+)", result.stdout)
    assert extract_jobs and int(extract_jobs.group(1)) == len(expected)
    passes = re.search(r"extract_model\s+(\d+)", result.stdout)  # one pass per model
    assert passes and int(passes.group(1)) == len(config["extract"]["models"])


def test_unreachable_pretrained_weights_give_one_clear_line(tmp_path):
    config = {
        "extract": {
            "models": [
                {
                    "name": "bert-hub",
                    "family": "bert",
                    "model": "bert-base-uncased",
                    "weights": "pretrained",
                    "layers": [0],
                    "n": 16,
                    "data": {"T": 8},
                }
            ]
        }
    }
    (tmp_path / "offline.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "hf").mkdir()
    offline = {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    target = "results/extract/bert-hub/0/provenance.json"
    result = snakemake(
        tmp_path,
        target,
        "--cores",
        "1",
        "--configfile",
        str(tmp_path / "offline.yaml"),
        env=offline,
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0
    lines = [line for line in output.splitlines() if "cannot load 'bert-base-uncased'" in line]
    assert len(lines) == 1, output
    assert "model 'bert-hub'" in lines[0] and "HF_HUB_OFFLINE is set" in lines[0]
    assert "hf download bert-base-uncased" in lines[0]  # fix 1: fill the cache
    assert "local save_pretrained directory" in lines[0]  # fix 2: local weights
    assert "Traceback" not in output
    log = (tmp_path / "logs" / "extract_model" / "bert-hub.log").read_text()
    assert "cannot load 'bert-base-uncased'" in log and "Traceback" not in log
    assert not (tmp_path / "results" / "extract" / "bert-hub" / "0" / "contexts.npy").exists()
