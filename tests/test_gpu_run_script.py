"""benchmarks/gpu/run.sh and benchmarks/gpu_scale_audit.py on the CPU: the commands they build,
their arguments, the workflow's command line as Snakemake parses it, and the partial record a
run cut short leaves (docs/gpu.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu" / "run.sh"
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_scale_audit  # noqa: E402


def printed(measurement: str, **env: str) -> dict[str, str]:
    """run.sh's PRINT_ONLY lines, keyed by what they are (install, measure)."""
    done = subprocess.run(
        ["bash", str(SCRIPT), measurement],
        env=os.environ | {"PRINT_ONLY": "1", "COMMIT": "abc123"} | env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return dict(line.split(": ", 1) for line in done.stdout.strip().splitlines())


@pytest.mark.parametrize(
    ("measurement", "model", "budget"),
    [
        ("audit-gpt2-large", "gpt2-large-random", 330),
        ("audit-7b", "llama-7b-random", 540),
        ("extract-gpt2-large", "gpt2-large-random", 300),
        ("extract-7b", "llama-7b-random", 300),
    ],
)
def test_audits_measure_one_model_under_a_time_guard(measurement, model, budget):
    lines = printed(measurement)
    stage = "extract" if measurement.startswith("extract") else None
    assert (f"--stage {stage}" in lines[f"measure ({budget} s)"]) == (stage is not None)
    assert "--no-index --no-deps" in lines["install"] and ".whl/*.whl" in lines["install"]
    command = lines[f"measure ({budget} s)"].split()
    assert command[1] == "benchmarks/gpu_scale_audit.py" and "--run" in command
    assert command[command.index("--model") + 1] == model
    assert command[command.index("--timeout") + 1] == str(budget)
    assert command[command.index("--commit") + 1] == "abc123"
    assert command[command.index("--out") + 1] == "benchmarks/gpu/out/scale_audit.json"
    quick = printed(measurement, BUDGET="90", OUT="/tmp/o", PYTHON="py", WHEELS="w")
    assert quick["measure (90 s)"].startswith("py benchmarks/gpu_scale_audit.py")
    assert (
        "--timeout 90" in quick["measure (90 s)"]
        and "/tmp/o/scale_audit" in quick["measure (90 s)"]
    )
    assert quick["install"].startswith("py -m pip") and "w/*.whl" in quick["install"]


@pytest.mark.parametrize(
    ("measurement", "script", "output"),
    [
        ("context-ranks", "bench_context_rank_device.py", "bench_context_rank_device.json"),
        ("profile-extract", "profile_extract.py", "profile_extract.json"),
        ("kruskal", "bench_kruskal_device.py", "bench_kruskal_device.json"),
        ("grid", "paper_a_grid.py", "paper_a_grid.json"),
        ("sweep", "gpu_sweeps.py", "gpu_sweeps.csv"),
    ],
)
def test_every_measurement_runs_an_existing_script_into_out(measurement, script, output):
    (command,) = (v for k, v in printed(measurement).items() if k.startswith("measure"))
    assert f"benchmarks/{script}" in command and (ROOT / "benchmarks" / script).is_file()
    assert output in command and "benchmarks/gpu/out/" in command
    if "--device" in command:
        assert "--device cuda" in command


def test_unknown_measurement_and_missing_wheels_stop_with_a_message(tmp_path):
    bogus = subprocess.run(["bash", str(SCRIPT), "bogus"], capture_output=True, text=True)
    assert bogus.returncode == 2 and "usage:" in bogus.stderr and "audit-7b" in bogus.stderr
    env = os.environ | {"WHEELS": str(tmp_path / "none"), "OUT": str(tmp_path / "out")}
    bare = subprocess.run(
        ["bash", str(SCRIPT), "kruskal"], env=env, capture_output=True, text=True, timeout=60
    )
    assert bare.returncode == 2 and "fetch_wheels.sh" in bare.stderr


def test_targets_precede_a_one_value_configfile_as_snakemake_parses_them(tmp_path):
    """The audit's command line, dry-run by Snakemake: the target is read as a target (the
    model's checks are planned), not as a second config file."""
    config = ROOT / "configs" / "scale.yaml"
    targets = gpu_scale_audit.audit_targets(["gpt2-large-random"])
    command = gpu_scale_audit.snakemake_command(tmp_path, config, 2, targets)
    assert command.index(targets[0]) < command.index(f"--configfile={config}")
    done = subprocess.run(
        [*command, "--dry-run", "--quiet", "rules"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    planned = done.stdout + done.stderr
    assert "check_assumptions" in planned and "extract_model" in planned
    assert "certify_real_capacity" not in planned  # the depth table's chain only


def test_a_run_cut_by_the_timeout_is_stopped_and_recorded_as_partial(tmp_path):
    start = time.perf_counter()
    wall, ended = gpu_scale_audit.run_workflow(["sleep", "60"], timeout=1)
    assert ended == "stopped at the 1 s timeout" and wall < 30
    assert time.perf_counter() - start < 30
    assert gpu_scale_audit.run_workflow(["false"], None)[1] == "failed (exit 1)"
    log = tmp_path / "logs" / "extract_model" / "m.log"
    log.parent.mkdir(parents=True)
    log.write_text("m:  45%|####5     | 900/2000 [01:40<02:00,  8.90ex/s]\n")
    record = gpu_scale_audit.model_timings(tmp_path, "m", 5000)
    assert record["status"] == "partial" and record["extract_seconds"] is None
    assert record["extract_progress"] == "900/2000 windows in 01:40"
    assert record["checked_layers"] == 0 and record["total_seconds"] == 0
    tsv = tmp_path / "benchmarks" / "results" / "extract_model" / "m.tsv"
    tsv.parent.mkdir(parents=True)
    tsv.write_text("s\th:m:s\n12.5\t0:00:12\n")
    assert gpu_scale_audit.model_timings(tmp_path, "m", 5000)["status"] == "extracted"
    assert gpu_scale_audit.audit_targets(["m"], "extract") == [
        "results/extract/m/0/context_ranks.npz"
    ]


def test_a_measured_model_joins_the_models_measured_before(tmp_path):
    out = tmp_path / "scale_audit.json"
    first = {"config": "configs/scale.yaml", "models": {"a": {"status": "complete"}}}
    out.write_text(json.dumps(first))
    second = {"config": "configs/scale.yaml", "models": {"b": {"status": "partial"}}}
    assert set(gpu_scale_audit.merged(second, out)["models"]) == {"a", "b"}
    other = {"config": "configs/other.yaml", "models": {"b": {}}}
    assert set(gpu_scale_audit.merged(other, out)["models"]) == {"b"}
