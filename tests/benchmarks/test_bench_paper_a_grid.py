"""benchmarks/paper_a_grid.py runs end to end on the CPU (tiny config, a few steps)."""

import json

from benchmark_runs import run_benchmark


def test_grid_benchmark_writes_every_sweeps_timing_and_the_grid_total(tmp_path):
    out = tmp_path / "grid.json"
    run = run_benchmark(
        "paper_a_grid.py", "configs/test.yaml",
        "--max-steps", "2", "--warmup", "1", "--sweeps", "context_size", "head_dim",
        "--max-padding", "0.2", "--group-by", "--models-per-sweep", "1", "--out", str(out),
        "--profile-steps", "2",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["device"] == "cpu" and report["precision"] == "float32"
    assert report["max_padding"] == 0.2 and report["group_by"] == []
    assert set(report["sweeps"]) == {"context_size", "head_dim"}
    for sweep in report["sweeps"].values():
        models = sweep["models"]
        kinds = {m["contexts"] for m in models}  # one timed model a context kind
        assert sum(m["measured"] for m in models) == len(kinds)
        assert sweep["measured_steps"] == 2 and sweep["padding"] <= 0.2 + 1e-9
        assert sweep["steps"] == sum(m["steps"] for m in models)
        assert sweep["grid_seconds"] >= sum(m["steps"] * m["seconds_per_step"] for m in models)
    total = sum(s["grid_seconds"] for s in report["sweeps"].values())
    assert abs(report["grid_hours"] * 3600 - total) < 1e-6 * max(total, 1.0)
    assert report["peak_tflops"] > 0
    for sweep in report["sweeps"].values():  # one profiled model a sweep: launches counted
        (profiled,) = [m["profile"] for m in sweep["models"] if "profile" in m]
        assert profiled["steps"] == 2 and profiled["wall_seconds"] > 0
