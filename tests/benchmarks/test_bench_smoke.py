"""The CPU benchmarks run end to end at their smallest real sizes and print their ratio (or,
for the stage timers, their total): a change to the code they drive cannot break them
silently. Sizes are far too small for the ratios to mean anything; docs/ records real runs.
Those that record their result write it to benchmark_runs' temporary folder, not
benchmarks/results/."""

import json
import re

import pytest
from benchmark_runs import RESULTS, run_benchmark

RUNS = {
    "bench_aot.py": "--shapes low_dim mlp0 --rounds 1 --repeats 1 --before .",  # itself
    "bench_context_rank.py": "--examples 8 --repeats 1",
    "bench_context_rank_device.py": "--d 16 --n 6 --T 40 --device cpu",
    "bench_equilibrate.py": "--examples 4 --chunk 2 --repeats 1",
    "bench_kruskal.py": "--T 100 --d 32 --n 16 --samples 20 --repeats 1 --workers 1 --threads 1",
    "bench_kruskal_device.py": "--d 16 --T 32 --samples 10 --repeats 1 --device cpu",
    "recipe_options.py": "--config configs/test.yaml --values 1 --options steps-2x --jobs 1",
    "bench_training.py": "--steps 5 --examples 8 --threads 1 --repeats 2",
    "bench_aot_stage.py": "--config configs/test.yaml",
    "bench_synthetic_stage.py": "--config configs/test.yaml",
}


@pytest.mark.parametrize("script", sorted(RUNS))
def test_benchmark_runs_and_reports(script):
    run = run_benchmark(script, *RUNS[script].split())
    assert run.returncode == 0, run.stderr[-2000:]
    last = run.stdout.strip().splitlines()[-1]
    if script.endswith("_stage.py"):
        assert re.fullmatch(r"total [\d.]+ s CPU( \(median of \d+\))?", last), last
    else:
        assert re.fullmatch(r"RATIO( [\w/]+)? [\d.]+", last), last
        assert float(last.split()[-1]) > 0
    if "result file: " in run.stdout:  # every benchmark that prints RATIO, once wired
        result = json.loads((RESULTS / script.replace(".py", ".json")).read_text())
        assert result["benchmark"] == script.removesuffix(".py")
        if not script.endswith("_stage.py"):
            assert abs(result["ratio"] - float(last.split()[-1])) < 0.01


def test_the_benchmarks_that_record_write_their_result_file():
    run = run_benchmark("bench_context_rank.py", *RUNS["bench_context_rank.py"].split())
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads((RESULTS / "bench_context_rank.json").read_text())
    assert result["ratio"] > 0 and result["ours"]["unit"] == "s" and result["repeats"] == 1
    assert result["machine"]["matmul_gflops_1thread"] > 0 and result["source"] == "measured"


def test_the_extraction_profile_names_its_stages(tmp_path):
    out = tmp_path / "profile.json"
    run = run_benchmark(
        "profile_extract.py", "configs/test.yaml", "--model", "gpt2-tiny", "--T", "24",
        "--out", str(out), "--torch-profile", str(tmp_path / "ops.txt"),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    profile = json.loads(out.read_text())
    assert (profile["T"], profile["device"], profile["clock"]) == (24, "cpu", "cpu")
    stages = profile["stages"]
    assert set(stages) == {"model", "inputs", "forward", "device copies", "context ranks", "writes"}
    assert stages["forward"] > 0 and stages["context ranks"] > 0 and stages["model"] > 0
    assert sum(stages.values()) - stages["device copies"] <= profile["cpu_seconds"] * 1.05
    assert profile["top_functions"][0]["own_seconds"] > 0
    assert "aten::" in (tmp_path / "ops.txt").read_text()
