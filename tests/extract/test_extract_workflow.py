"""The extract rules through the Snakemake CLI (temporary working directory)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

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


def test_dry_run_plans_one_job_per_model_writing_its_folder(tmp_path):
    result = snakemake(tmp_path, "-n", "--configfile", str(ROOT / "configs" / "test.yaml"))
    assert result.returncode == 0, result.stderr + result.stdout
    jobs = re.findall(r"rule extract_model:\n((?:    .*\n)+)", result.stdout)
    folders = [re.search(r"output: (\S+)", job).group(1) for job in jobs]
    config = yaml.safe_load((ROOT / "configs" / "test.yaml").read_text())
    assert sorted(folders) == sorted(
        f"results/extract/{m['name']}" for m in config["extract"]["models"]
    )
    # Its readers take the folder: no job for a single layer.
    assert "layer=" not in result.stdout


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
    target = "results/extract/bert-hub"
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
    assert not (tmp_path / "results" / "extract" / "bert-hub").exists()
