"""benchmarks/gpu/run.sh and benchmarks/gpu_scale_audit.py on the CPU: the commands they build,
their arguments, the workflow's command line as Snakemake parses it, and the partial record a
run cut short leaves (docs/gpu.md)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu" / "run.sh"
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_scale_audit  # noqa: E402


def printed(*measurements: str, **env: str) -> dict[str, str]:
    """run.sh's PRINT_ONLY lines, keyed by what they are (install, each measurement)."""
    done = subprocess.run(
        ["bash", str(SCRIPT), *measurements],
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
    assert (f"--stage {stage}" in lines[f"{measurement} ({budget} s)"]) == (stage is not None)
    assert "--no-index --no-deps" in lines["install"] and ".whl/*.whl" in lines["install"]
    command = lines[f"{measurement} ({budget} s)"].split()
    assert command[1] == "benchmarks/gpu_scale_audit.py" and "--run" in command
    assert command[command.index("--model") + 1] == model
    assert command[command.index("--timeout") + 1] == str(budget)
    assert command[command.index("--commit") + 1] == "abc123"
    assert command[command.index("--out") + 1] == "benchmarks/gpu/out/scale_audit.json"
    quick = printed(measurement, BUDGET="90", OUT="/tmp/o", PYTHON="py", WHEELS="w")
    line = quick[f"{measurement} (90 s)"]
    assert line.startswith("py benchmarks/gpu_scale_audit.py")
    assert "--timeout 90" in line and "/tmp/o/scale_audit" in line
    assert quick["install"].startswith("py -m pip") and "w/*.whl" in quick["install"]


@pytest.mark.parametrize(
    ("measurement", "script", "output"),
    [
        ("context-ranks", "bench_context_rank_device.py", "bench_context_rank_device.json"),
        ("profile-extract", "profile_extract.py", "profile_extract.json"),
        ("kruskal", "bench_kruskal_device.py", "bench_kruskal_device.json"),
        ("grid", "paper_a_grid.py", "paper_a_grid.json"),
        ("grid-eager", "paper_a_grid.py", "paper_a_grid_eager.json"),
        ("sweep", "gpu_sweeps.py", "gpu_sweeps.csv"),
        ("paper-a-sweep", "gpu_sweeps.py", "paper_a_sweep.json"),
    ],
)
def test_every_measurement_runs_an_existing_script_into_out(measurement, script, output):
    (command,) = (v for k, v in printed(measurement).items() if k.startswith(measurement))
    assert f"benchmarks/{script}" in command and (ROOT / "benchmarks" / script).is_file()
    assert output in command and "benchmarks/gpu/out/" in command
    if "--device" in command:
        assert "--device cuda" in command


def test_several_measurements_share_one_call_in_the_order_given():
    lines = printed("extract-7b", "kruskal", "context-ranks")
    assert list(lines) == ["install", "extract-7b (300 s)", "kruskal (300 s)"] + [
        "context-ranks (240 s)"
    ]


def test_a_measurements_own_budget_overrides_the_calls():
    lines = printed("grid=200", "extract-7b", BUDGET="90")
    assert list(lines) == ["install", "grid=200 (200 s)", "extract-7b (90 s)"]
    assert (
        "paper_a_grid.py" in lines["grid=200 (200 s)"]
        and "--cuda-graph" in lines["grid=200 (200 s)"]
    )
    assert "--timeout 90" in lines["extract-7b (90 s)"]


def test_unknown_measurement_and_missing_wheels_stop_with_a_message(tmp_path):
    for args in (["bogus"], ["kruskal", "bogus"], []):
        bogus = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True)
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
    # one check job per model (its log is read), though scale.yaml cuts the checks per layer
    stats = planned.split("Job stats:", 1)[1].split("total", 1)[0]
    counts = {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", stats, re.M)}
    assert counts == {"extract_model": 1, "check_assumptions": 1}
    assert "certify_real_capacity" not in planned  # the check job's chain only


def test_a_run_cut_by_the_timeout_is_stopped_and_recorded_as_partial(tmp_path):
    wall, ended = gpu_scale_audit.run_workflow(["sleep", "600"], timeout=1)
    assert ended == "stopped at the 1 s timeout" and wall >= 1  # waited for the timeout only
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
    assert gpu_scale_audit.audit_targets(["m"], "extract") == ["results/extract/m"]
    assert gpu_scale_audit.audit_targets(["m"]) == ["results/assumptions/jobs/m"]


def test_a_measured_model_joins_the_models_measured_before(tmp_path):
    out = tmp_path / "scale_audit.json"
    first = {"config": "configs/scale.yaml", "models": {"a": {"status": "complete"}}}
    out.write_text(json.dumps(first))
    second = {"config": "configs/scale.yaml", "models": {"b": {"status": "partial"}}}
    assert set(gpu_scale_audit.merged(second, out)["models"]) == {"a", "b"}
    other = {"config": "configs/other.yaml", "models": {"b": {}}}
    assert set(gpu_scale_audit.merged(other, out)["models"]) == {"b"}


def fake_wheel(folder: Path) -> None:
    """A minimal valid wheel (one empty package), for pip to install offline."""
    files = {
        "fake_pkg/__init__.py": b"",
        "fake_pkg-0.0.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: fake-pkg\n"
        b"Version: 0.0.0\n",
        "fake_pkg-0.0.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\n"
        b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    digests = {
        name: base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        for name, data in files.items()
    }
    record = "".join(f"{name},sha256={digests[name]},{len(files[name])}\n" for name in files)
    record += "fake_pkg-0.0.0.dist-info/RECORD,,\n"
    folder.mkdir()
    with zipfile.ZipFile(folder / "fake_pkg-0.0.0-py3-none-any.whl", "w") as wheel:
        for name, data in files.items():
            wheel.writestr(name, data)
        wheel.writestr("fake_pkg-0.0.0.dist-info/RECORD", record)


@pytest.mark.skipif(
    subprocess.run(["python3", "-m", "pip", "--version"], capture_output=True).returncode != 0,
    reason="needs a python3 with pip, as the GPU image has",
)
def test_a_failing_measurement_still_leaves_its_logs_in_out(tmp_path):
    """The wheels are installed, the measurement fails (no CUDA here), and $OUT still holds
    the run's logs: the trap collects them whatever happened."""
    fake_wheel(tmp_path / "wheels")
    env = os.environ | {
        "OUT": str(tmp_path / "out"),
        "SITE": str(tmp_path / "site"),
        "WHEELS": str(tmp_path / "wheels"),
        "PYTHON": "python3",
        "BUDGET": "60",
    }
    done = subprocess.run(
        ["bash", str(SCRIPT), "context-ranks"], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert (tmp_path / "site" / "fake_pkg").is_dir()
    with tarfile.open(tmp_path / "out" / "logs.tar.gz") as logs:
        names = {Path(name).name for name in logs.getnames()}
    assert {"run.log", "context-ranks.log", "utilization.csv", "nvidia-smi.txt"} <= names
