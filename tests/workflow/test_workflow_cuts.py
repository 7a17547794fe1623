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

import memcap.aot.cut as aot_cut
import memcap.synthetic.cut as synthetic_cut
from memcap.aot.cut import sweep_settings
from memcap.cluster.plan import parse_dry_run
from memcap.config_schema import validate_schema
from memcap.extract.depth import with_layers
from memcap.extract.entries import model_entries
from memcap.extract.layer_spec import layer_name
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


# One compute rule per stage whatever its cut (a {job} each), then the summaries: no merges.
COMPUTE_RULES = {"extract_model", "convert_onnx_weights", "check_assumptions"}
COMPUTE_RULES |= {"certify_real_capacity", "train_synthetic", "train_aot"}
COMPUTE_RULES |= {"train_real_memorization"}
SUMMARY_RULES = {"summarize_assumptions", "summarize_synthetic", "summarize_real_capacity"}
SUMMARY_RULES |= {"summarize_real_memorization"}
SUMMARY_RULES |= {"summarize_aot", "plot_synthetic", "plot_aot", "render_report"}


def _jobs(jobs: list, rule: str) -> list[str]:
    return [job.wildcards["job"] for job in jobs if job.rule == rule]


def test_the_papers_run_is_one_job_per_setting_and_layer_each_within_a_day():
    config, jobs = _config("configs/paper.yaml"), _dry_run("configs/paper.yaml")
    section = config["synthetic"]
    settings = [
        f"{name}/{s}"
        for name in sweep_names(section)
        for s in setting_ids(sweep_spec(section, name))
    ]
    assert sorted(_jobs(jobs, "train_synthetic")) == sorted(settings)
    assert len(settings) == 13 * 2 + 13 * 2 + 10
    aot = config["aot"]["sweeps"]
    aot_settings = [f"{n}/{s}" for n, spec in aot.items() for s in sweep_settings(n, spec)]
    assert sorted(_jobs(jobs, "train_aot")) == sorted(aot_settings)
    layers = [
        f"{e.name}/{layer_name(layer)}"
        for e in map(with_layers, model_entries(config))
        for layer in e.layers
    ]
    assert sorted(_jobs(jobs, "check_assumptions")) == sorted(layers)
    trained = [job.wildcards["model"] for job in jobs if job.rule == "train_real_memorization"]
    assert sorted(trained) == sorted(e["name"] for e in config["extract"]["models"])
    assert not {job.rule for job in jobs} - COMPUTE_RULES - SUMMARY_RULES - {"all"}
    for configfile, plan in (("configs/paper.yaml", jobs), ("configs/scale.yaml", None)):
        plan = plan or _dry_run(configfile)
        gpu = [job for job in plan if job.gpus]
        assert gpu, configfile
        longest = max(int(job.resources["runtime"]) for job in plan if "runtime" in job.resources)
        assert longest <= DAY_MINUTES, (configfile, longest)


def test_the_default_run_keeps_one_job_per_sweep_stage_and_model():
    jobs = _dry_run("config.yaml")
    assert sorted(_jobs(jobs, "train_synthetic")) == ["context_size", "head_dim", "heads"]
    assert _jobs(jobs, "train_aot") == ["all"]
    models = [m["name"] for m in _config("config.yaml")["extract"]["models"]]
    assert sorted(_jobs(jobs, "check_assumptions")) == sorted(models)
    real = [entry["model"] for entry in _config("config.yaml")["real_memorization"]["layers"]]
    trained = [job.wildcards["model"] for job in jobs if job.rule == "train_real_memorization"]
    assert sorted(trained) == sorted(set(real))  # one job a model
    assert not {job.rule for job in jobs} - COMPUTE_RULES - SUMMARY_RULES - {"all"}


def test_a_job_id_turns_back_into_what_its_job_trains():
    """Each cut's jobs by their one {job} wildcard, matched by its rule's constraint and read
    back by the thin script: paper A's sweep or setting, paper B's stage, sweep or setting."""
    config = _config("configs/test_paper.yaml")
    section = config["synthetic"]
    jobs = synthetic_cut.job_ids(section)
    assert section["cut"] == "setting" and jobs[0] == "heads/H1_shared"
    spec = synthetic_cut.job_spec(section, jobs[0])
    assert (spec.name, spec.values, spec.contexts) == ("heads", (1,), ("shared",))
    assert synthetic_cut.job_ids(section | {"cut": "sweep"}) == sweep_names(section)
    assert synthetic_cut.job_spec(section, "heads") == sweep_spec(section, "heads")
    assert all(re.fullmatch(synthetic_cut.job_pattern(), job) for job in [*jobs, "heads"])
    for other in ("heads_saturation", "heads/H1_shared_provenance", "all"):
        assert not re.fullmatch(synthetic_cut.job_pattern(), other)
    aot = config["aot"]
    names = list(aot["sweeps"])
    jobs = aot_cut.job_ids(aot)
    assert jobs[0].startswith(f"{names[0]}/") and len(jobs) == sum(
        len(sweep_settings(n, s)) for n, s in aot["sweeps"].items()
    )
    assert aot_cut.job_ids(aot | {"cut": "stage"}) == ["all"]
    assert aot_cut.job_ids(aot | {"cut": "sweep"}) == names
    assert aot_cut.job_sweeps("stage", "all", names) == names
    name, setting = jobs[0].split("/")
    assert aot_cut.job_sweeps("setting", jobs[0], names) == [name]
    spec = aot["sweeps"][name]
    assert aot_cut.job_setting(jobs[0], name, spec) == sweep_settings(name, spec)[setting]
    assert aot_cut.job_setting(name, name, spec) is None
    pattern = aot_cut.job_pattern(names)
    assert all(re.fullmatch(pattern, job) for job in [*jobs, *names, "all"])
    assert not re.fullmatch(pattern, f"{name}_provenance")


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
    coarse run but its training jobs' own tables is byte for byte the fine run's, but a
    wall-time column (the Kruskal search's), which differs between any two runs and is
    compared without its timings."""
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
    fine, coarse_root = runs["fine"] / "results", runs["coarse"] / "results"
    tables = sorted(p.relative_to(coarse_root) for p in coarse_root.rglob("*.csv"))
    # The training jobs' own tables differ by cut (a sweep's, paper B's whole stage's, or a
    # setting's): the summaries read them all, in the order of the sweeps' rows. A layer's
    # checks lie in jobs/{model}/{layer}/ under either cut and are compared.
    trained = [
        name for name in tables if name.parts[:2] in (("synthetic", "jobs"), ("aot", "jobs"))
    ]
    assert trained and not any((fine / name).exists() for name in trained)
    assert (fine / "synthetic" / "jobs" / "heads").is_dir()
    assert (fine / "aot" / "jobs" / "heads").is_dir()
    tables = [name for name in tables if name not in trained]
    assert len(tables) > 20
    assert any(name.parts[:2] == ("assumptions", "jobs") for name in tables)
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
