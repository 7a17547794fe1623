"""memcap.cluster: the cost model's work bound, its requests, the committed rates, the dry
run's parsing and the longest-first schedule."""

import dataclasses
import itertools
import random
import subprocess
import sys
from pathlib import Path

import pytest

from memcap.cluster import costs
from memcap.cluster.plan import local_rules, longest_first, parse_dry_run, request_rows
from memcap.synthetic.series import (
    Series,
    Trained,
    bracket,
    bracket_grouping,
    bracket_passes,
    check,
    climb,
)
from memcap.synthetic.settings import Convergence, Ladder, StageSettings, SweepSpec

ROOT = Path(__file__).resolve().parents[2]
SPEC = SweepSpec("heads", (1, 2), (8, 16), 0, 3, 3, ("shared", "random"), ("classification",),
                 {}, "ours", 2)  # fmt: skip


def _stage(ladder: Ladder, convergence: Convergence) -> StageSettings:
    train = {"steps": 10, "lr": 0.1, "warmup_frac": 0.0, "schedule": "constant",
             "batch_size": None, "eval_every": 5, "early_stop": True, "extra_budgets": 1,
             "extra_lr_frac": 0.1, "regression_tol": 0.01}  # fmt: skip
    authors = {"steps": 10, "epochs": 4, "lr": 0.01, "batch_size": 4, "warmup_frac": 0.05,
               "warmup_start": 0.01, "eval_every": 5, "early_stop": False}  # fmt: skip
    return StageSettings(6, 5, 1, 0, 0.99, train, authors, ("shape", "context"), None,
                         "float32", False, False, False, ladder, convergence, False)  # fmt: skip


@pytest.mark.parametrize(
    ("grow_at", "warm_start", "restarts", "factor", "recipe", "ratio"),
    [
        *itertools.product([None, 0.5], [False, True], [0, 2], [None, 3], ["ours", "authors"],
                           [None]),
        *itertools.product([None, 0.5], [False], [0], [None, 3], ["ours", "authors"], [1.1, 1.25]),
    ],
)  # fmt: skip
def test_the_protocol_bound_costs_at_least_what_the_protocol_trains(
    grow_at, warm_start, restarts, factor, recipe, ratio
):
    """Whatever the counts memorized, the passes the protocol runs cost no more steps, FLOPs
    or SVDs than the bound's (the bracket's bisection among them)."""
    ladder = Ladder(grow_at, 2.0, 64, warm_start, restarts, ratio)
    stage = _stage(ladder, Convergence(factor or 0, 0.05))
    spec = SPEC if recipe == "ours" else dataclasses.replace(SPEC, recipe="authors")
    draw = random.Random(f"{grow_at}{warm_start}{restarts}{factor}{recipe}{ratio}")
    passes = []

    def train(replicas, states):
        passes.append(replicas)
        memorized = {r: draw.choice([0, r.T // 2, r.T]) for r in replicas}
        return {r: Trained({"memorized": m}, [], None, r.restart) for r, m in memorized.items()}

    def budget(T):
        cfg = stage.train_config(spec, T)
        return cfg.steps * (1 + cfg.extra_budgets)

    for _ in range(5):
        series = [Series(s, seed) for s in spec.settings() for seed in stage.replicate_seeds(spec)]
        climb(series, spec.T, ladder, train)
        check(series, ladder, stage.convergence, budget, train)
        before = len(passes)
        bracket(series, ladder, stage.convergence, budget, train)
        bisected = passes[before:]  # trained as the sweep trains them: buckets of any T
        assert len(bisected) <= sum(n for n, _ in bracket_passes(spec.T, ladder))
        ran = costs.add(
            costs.passes_work(spec, stage, passes[:before]),
            costs.passes_work(spec, bracket_grouping(stage), bisected),
        )
        bound = costs.synthetic_work(spec, stage)
        for unit, amount in ran.items():
            assert amount <= bound[unit] * (1 + 1e-12), (unit, amount, bound[unit])
        passes.clear()


def test_requests_add_the_margin_to_the_start_and_never_go_below_the_floor():
    rates = costs.load_rates(ROOT)["gpu"]
    assert costs.runtime_minutes({}, rates) == costs.FLOOR_MINUTES
    hour = {"synthetic_step": 3600 / rates.synthetic_step}
    assert costs.work_seconds(hour, rates) == pytest.approx(3600)
    expected = (rates.start_s + costs.MARGIN * 3600) / 60
    assert costs.runtime_minutes(hour, rates) == int(expected) + (expected % 1 > 0)
    assert costs.expected_seconds(hour, rates) == pytest.approx(3600 + rates.start_s)


def test_the_committed_rates_cover_every_measurement_and_are_current():
    """Each rate is at or above each of its measurements (ratio <= 1); the GPU rates derive
    again from the committed GPU files, the CPU rates from the file's own measurements."""
    result = subprocess.run(
        [sys.executable, "benchmarks/cluster_costs.py", "--check"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    import json

    measured = json.loads((ROOT / costs.COSTS_FILE).read_text())["measured"]
    assert {m["device"] for m in measured} == {"gpu", "cpu"}
    assert all(m["ratio"] <= 1 + 1e-9 for m in measured), [m for m in measured if m["ratio"] > 1]


def test_the_cost_file_keeps_12_digits_and_its_check_ignores_the_cpus_last_digits():
    """The fits' last digits move with the CPU's BLAS: the file keeps 12 significant digits,
    and --check takes a 1e-12 relative difference as current, a 1e-6 one as stale."""
    import json

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from cluster_costs import rounded, same

    assert rounded({"a": [1.9784126489808007e-13, 3, "x"]}) == {"a": [1.97841264898e-13, 3, "x"]}
    text = (ROOT / costs.COSTS_FILE).read_text()
    assert rounded(json.loads(text)) == json.loads(text)
    base = {"rates": {"r": 1.9784126489808007e-13, "n": 2}, "job": "x"}
    assert same(base, {"rates": {"r": 1.9784126489808002e-13, "n": 2}, "job": "x"})
    assert not same(base, {"rates": {"r": 1.97841e-13, "n": 2}, "job": "x"})
    assert not same(base, {"rates": {"r": 1.9784126489808007e-13, "n": 2}, "job": "y"})
    assert not same(base, {"rates": {"r": 1.9784126489808007e-13}, "job": "x"})


@pytest.mark.parametrize("devices", [1, 2, 3])
def test_longest_first_is_within_four_thirds_of_the_best_schedule(devices):
    draw = random.Random(devices)
    for _ in range(30):
        jobs = [draw.uniform(1, 10) for _ in range(draw.randint(1, 7))]
        best = min(
            max(sum(j for j, d in zip(jobs, assign, strict=True) if d == k) for k in range(devices))
            for assign in itertools.product(range(devices), repeat=len(jobs))
        )
        wall = longest_first(jobs, devices)
        assert best - 1e-9 <= wall <= 4 / 3 * best + 1e-9
        assert wall >= max(max(jobs), sum(jobs) / devices) - 1e-9


DRY_RUN = """
[Sat Nov 28 03:48:06 2026]
rule run_synthetic_setting:
    output: results/synthetic/heads/H1_shared.csv
    jobid: 3
    wildcards: sweep=heads, setting=H1_shared
    resources: tmpdir=/tmp, mem_mb=1641, mem=1.64 GB, runtime=12, gpu=1
Shell command: None

rule run_synthetic_setting:
    output: results/synthetic/heads/H60_random.csv
    jobid: 4
    wildcards: sweep=heads, setting=H60_random
    resources: tmpdir=/tmp, mem_mb=5806, runtime=27, gpu=1

rule merge_synthetic_settings:
    input: results/synthetic/heads/H1_shared.csv
    wildcards: sweep=heads
    resources: tmpdir=/tmp, mem_mb=1000, runtime=30

rule summarize_synthetic:
    input: results/synthetic/heads.csv
    resources: tmpdir=/tmp, mem_mb=1000, runtime=30
Shell command: None
[Sat Nov 28 07:24:34 2026] Group job report (jobs in lexicogr. order):

    [Sat Nov 28 07:24:34 2026]
    rule plot_synthetic:
        input: results/synthetic/capacity.csv
        jobid: 12
        resources: tmpdir=/tmp, mem_mb=1000, mem=1 GB, runtime=30
Shell command: None

    [Sat Nov 28 07:24:34 2026]
    rule render_report:
        output: reports/report.html
        jobid: 20
        resources: tmpdir=/tmp, mem_mb=1000, mem=1 GB, runtime=30
Shell command: None
"""


def test_the_dry_run_gives_each_jobs_rule_wildcards_and_requests():
    jobs = parse_dry_run(DRY_RUN)
    assert [j.rule for j in jobs] == [
        "run_synthetic_setting", "run_synthetic_setting", "merge_synthetic_settings",
        "summarize_synthetic", "plot_synthetic", "render_report",
    ]  # fmt: skip
    assert jobs[1].wildcards == {"sweep": "heads", "setting": "H60_random"} and jobs[1].gpus == 1
    assert [j.grouped for j in jobs] == [False] * 4 + [True] * 2
    assert jobs[5].resources["mem_mb"] == "1000" and jobs[5].resources["runtime"] == "30"
    local = local_rules(["localrules:\n    merge_synthetic_settings,\n"])
    rows = request_rows(list(reversed(jobs)), {"run_synthetic_setting": 4}, local)
    assert rows == [
        {"rule": "run_synthetic_setting", "jobs": "2", "GPU": "1", "CPUs": "4",
         "runtime (min)": "12 – 27", "mem_mb": "1,641 – 5,806"},
        {"rule": "plot_synthetic (in a group job)", "jobs": "1", "GPU": "–", "CPUs": "1",
         "runtime (min)": "30", "mem_mb": "1,000"},
        {"rule": "render_report (in a group job)", "jobs": "1", "GPU": "–", "CPUs": "1",
         "runtime (min)": "30", "mem_mb": "1,000"},
        {"rule": "summarize_synthetic", "jobs": "1", "GPU": "–", "CPUs": "1",
         "runtime (min)": "30", "mem_mb": "1,000"},
    ]  # fmt: skip
