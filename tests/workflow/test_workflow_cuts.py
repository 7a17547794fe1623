"""The job cuts (synthetic.cut, aot.cut, assumptions.cut): the paper-size dry runs cut where the
work is and ask for at most a day of one GPU, docs/cluster.md's generated blocks are current,
and the tiny paper-shaped config writes the same tables in both cuts."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from workflow_copy import copy_workflow, run_snakemake

from memcap.aot.cut import sweep_settings
from memcap.cluster.plan import parse_dry_run
from memcap.config_schema import validate_schema
from memcap.extract.depth import with_layers
from memcap.extract.entries import model_entries
from memcap.synthetic.cut import setting_ids
from memcap.synthetic.settings import sweep_names, sweep_spec

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
DAY_MINUTES = 24 * 60


def _dry_run(configfile: str) -> list:
    args = ["-n", "--forceall", "--profile", "profiles/slurm", "--configfile", configfile]
    result = run_snakemake(ROOT, *args, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return parse_dry_run(result.stdout)


def _config(configfile: str) -> dict:
    config = yaml.safe_load((ROOT / configfile).read_text())
    validate_schema(config, SCHEMA)
    return config


def _counts(jobs: list) -> dict[str, int]:
    counts: dict[str, int] = {}
    for job in jobs:
        counts[job.rule] = counts.get(job.rule, 0) + 1
    return counts


def test_the_papers_run_is_one_job_per_setting_and_layer_each_within_a_day():
    config, jobs = _config("configs/paper.yaml"), _dry_run("configs/paper.yaml")
    counts = _counts(jobs)
    section = config["synthetic"]
    settings = [s for name in sweep_names(section) for s in setting_ids(sweep_spec(section, name))]
    assert counts["run_synthetic_setting"] == len(settings) == 13 * 2 + 13 * 2 + 10
    aot = config["aot"]["sweeps"]
    assert counts["train_aot_setting"] == sum(len(sweep_settings(n, s)) for n, s in aot.items())
    layers = sum(len(with_layers(e).layers) for e in model_entries(config))
    assert counts["check_assumption_layer"] == layers
    coarse = {"run_synthetic_sweep", "train_aot", "train_aot_sweep", "check_assumptions"}
    assert not coarse & set(counts)
    for configfile, plan in (("configs/paper.yaml", jobs), ("configs/scale.yaml", None)):
        plan = plan or _dry_run(configfile)
        gpu = [job for job in plan if job.gpus]
        assert gpu, configfile
        longest = max(int(job.resources["runtime"]) for job in plan if "runtime" in job.resources)
        assert longest <= DAY_MINUTES, (configfile, longest)


def test_the_default_run_keeps_one_job_per_sweep_stage_and_model():
    counts = _counts(_dry_run("config.yaml"))
    assert counts["run_synthetic_sweep"] == 3 and counts["train_aot"] == 1
    assert counts["check_assumptions"] == len(_config("config.yaml")["extract"]["models"])
    assert not {r for r in counts if r.startswith(("merge_", "train_aot_", "run_synthetic_set"))}


def test_the_cluster_pages_generated_blocks_are_current():
    """docs/cluster.md's costs, requests and plan are what the scripts print now."""
    for script in ("cluster_costs.py", "cluster_plan.py"):
        result = subprocess.run(
            [sys.executable, f"benchmarks/{script}", "--check"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert result.returncode == 0, result.stdout + result.stderr


TIMINGS = re.compile(r"seconds|time|_s$")


@pytest.mark.slow
def test_both_cuts_write_byte_identical_tables(tmp_path):
    """configs/test_paper.yaml in its fine cuts and in the coarse ones: every CSV of the
    coarse run is byte for byte the fine run's, but a wall-time column (the Kruskal search's),
    which differs between any two runs and is compared without its timings."""
    runs = {}
    for cut, cuts in (
        ("fine", ("setting", "setting", "layer")),
        ("coarse", ("sweep", "stage", "model")),
    ):
        repo = tmp_path / cut
        copy_workflow(repo)
        config = yaml.safe_load((repo / "configs" / "test_paper.yaml").read_text())
        for section, value in zip(("synthetic", "aot", "assumptions"), cuts, strict=True):
            config[section]["cut"] = value
        (repo / "configs" / "cuts.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        env = {**os.environ, "PYTHONPATH": str(repo / "src")}
        args = ("--cores", "2", "--configfile", "configs/cuts.yaml")
        run_snakemake(repo, *args, timeout=1800, env=env)
        runs[cut] = repo
    fine = runs["fine"] / "results"
    tables = sorted(
        p.relative_to(runs["coarse"] / "results")
        for p in (runs["coarse"] / "results").rglob("*.csv")
    )
    assert len(tables) > 20
    assert (fine / "synthetic" / "heads").is_dir() and (fine / "aot" / "heads").is_dir()
    for name in tables:
        coarse_bytes, fine_bytes = (
            (runs["coarse"] / "results" / name).read_bytes(),
            (fine / name).read_bytes(),
        )
        if coarse_bytes == fine_bytes:
            continue
        coarse, other = pd.read_csv(runs["coarse"] / "results" / name), pd.read_csv(fine / name)
        timings = [c for c in coarse.columns if TIMINGS.search(c)]
        assert timings, f"{name} differs between the cuts"
        pd.testing.assert_frame_equal(
            other.drop(columns=timings), coarse.drop(columns=timings), check_exact=True
        )
