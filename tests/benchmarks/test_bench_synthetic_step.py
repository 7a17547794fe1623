"""benchmarks/bench_synthetic_step.py runs end to end on the CPU (tiny config, two steps)."""

import re

from benchmark_runs import run_benchmark


def test_step_benchmark_prints_every_model_and_its_ratio_split_and_bound():
    run = run_benchmark(
        "bench_synthetic_step.py", "configs/test.yaml", "--steps", "2", "--repeats", "1"
    )
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stdout.splitlines()
    rows = [line.split() for line in lines if re.match(r"\d+ +\d+ ", line)]
    assert len(rows) == 2  # configs/test.yaml's heads sweep: one model per task
    # structure, not milliseconds: every timed column and share is a number, none negative
    assert all(int(row[1]) == 8 and min(map(float, row[-5:-1])) >= 0 for row in rows)  # by kind
    split = next(line for line in lines if line.startswith("SPLIT"))
    for kind in ("BLAS", "element-wise", "copies", "Adam", "the rest", "30% budget"):
        assert kind in split, split
    shares = [float(v) for v in re.findall(r"(-?[\d.]+) ms", split)]
    assert len(shares) == 6 and min(shares[:4]) >= 0 and shares[5] >= 0
    value = {
        name: float(next(line for line in lines if line.startswith(f"{name} ")).split()[1])
        for name in ("CEILING", "BOUND", "RATIO")
    }
    assert value["CEILING"] >= 0 and value["BOUND"] >= value["CEILING"]  # products < all needed
    assert 0 <= value["RATIO"] < value["BOUND"]
