"""The cluster's jobs and a plan on paper, from Snakemake's dry runs and the cost model.

Runs ``snakemake -n --forceall --profile profiles/slurm`` on configs/paper.yaml and
configs/scale.yaml, reads every job's rule, wildcards and requests, and prints:

- the requests by rule at paper size (docs/cluster.md's table, between its
  ``cluster-table`` markers);
- the plan: each job's expected seconds (memcap.cluster.jobs, no margin), scheduled longest
  first on G = 1, 8, 16 and 64 GPUs of the measured kind (docs/cluster.md's figures, between
  its ``cluster-plan`` markers). Paper A's grid: its train_synthetic jobs, independent.
  The scale audit: its extractions, then its checks (each check reads its model's
  extraction; scheduling the two phases one after the other bounds the overlap from above);
  the certified capacity runs on host CPUs beside them and is printed apart.

    .venv/bin/python benchmarks/cluster_plan.py           # prints both
    .venv/bin/python benchmarks/cluster_plan.py --write   # writes them into docs/cluster.md
    .venv/bin/python benchmarks/cluster_plan.py --check   # exit 1 when the page differs

Rerun --write after benchmarks/cluster_costs.py whenever a measurement lands.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from memcap.cluster import costs  # noqa: E402
from memcap.cluster.jobs import JobCosts  # noqa: E402
from memcap.cluster.plan import (  # noqa: E402
    DryJob,
    local_rules,
    longest_first,
    markdown,
    parse_dry_run,
    request_rows,
)
from memcap.config_schema import validate_schema  # noqa: E402
from memcap.extract.depth import with_layers  # noqa: E402
from memcap.extract.entries import model_entries  # noqa: E402
from memcap.synthetic.settings import (  # noqa: E402
    StageSettings,
    replica_groups,
    sweep_spec,
)

DOC = ROOT / "docs" / "cluster.md"
GRID = ROOT / "benchmarks" / "gpu" / "paper_a_grid.json"  # the measured paper A models
PROFILE = ROOT / "profiles" / "slurm" / "config.yaml"
DEVICES = (1, 8, 16, 64)
GOAL = ("paper A's grid", 16, 15 * 60)  # within 15 minutes on 16 GPUs
PHASES = {"extract_model": 0, "check_assumptions": 1}


def dry_run(configfile: str) -> list[DryJob]:
    """The jobs of a dry run of the whole workflow on ``configfile`` through the profile."""
    snakemake = Path(sys.executable).parent / "snakemake"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    args = [str(snakemake), "-n", "--forceall", "--profile", "profiles/slurm"]
    result = subprocess.run(
        [*args, "--configfile", configfile],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError((result.stdout + result.stderr)[-3000:])
    return parse_dry_run(result.stdout)


def threads() -> dict[str, int]:
    """The profile's CPU threads per rule."""
    return yaml.safe_load(PROFILE.read_text()).get("set-threads", {})


def job_costs(configfile: str) -> JobCosts:
    """The cost model on a config as a --configfile run sees it."""
    config = yaml.safe_load((ROOT / configfile).read_text())
    validate_schema(config, ROOT / "workflow" / "schemas" / "config.schema.yaml")
    entries = {e.name: e for e in model_entries(config)}
    return JobCosts(config, costs.load_rates(ROOT), cache(lambda name: with_layers(entries[name])))


def request_table(jobs: list[DryJob]) -> str:
    """The requests by rule, as docs/cluster.md shows them."""
    smk = [path.read_text() for path in (ROOT / "rules").glob("*.smk")]
    return markdown(request_rows(jobs, threads(), local_rules(smk)))


# What each unit of work is, for the breakdown of the expected time.
KINDS = {
    "start": "job starts (measured)",
    "synthetic_step": "batched-model steps (3 µs a kernel, assumed)",
    "synthetic_shared_flop": "training FLOPs (measured rates)",
    "synthetic_random_flop": "training FLOPs (measured rates)",
    "svd_flop": "float64 SVDs of Z (rate of one 2,000 × 1,280 SVD)",
    "aot_step": "paper B's steps (measured)",
    "ordering": "Kruskal orderings (measured)",
    "device_ordering": "Kruskal orderings (measured)",
    "token_layer": "extraction (measured)",
}


def expected_jobs(configfile: str, jobs: list[DryJob]) -> list[tuple[DryJob, float, dict]]:
    """Every sized job of ``jobs``: its expected seconds and their split by kind of work."""
    model, cpus = job_costs(configfile), threads()
    sized = []
    for job in jobs:
        work = model.work(job.rule, job.wildcards, cpus.get(job.rule, 1))
        if work is None:
            continue
        rates = model.rates[model.kind(job.rule)]
        split = {KINDS["start"]: rates.start_s}
        for unit, amount in work.items():
            kind = KINDS.get(unit, unit)
            split[kind] = split.get(kind, 0.0) + amount * getattr(rates, unit)
        sized.append((job, sum(split.values()), split))
    return sized


def plan(configfile: str, jobs: list[DryJob]) -> list[str]:
    """Lines of the plan for ``configfile``'s GPU jobs (and its host jobs, apart)."""
    sized = expected_jobs(configfile, jobs)
    gpu = [(job, s, split) for job, s, split in sized if job.gpus]
    phases: dict[int, list[float]] = {}
    for job, seconds, _ in gpu:
        phases.setdefault(PHASES.get(job.rule, 0), []).append(seconds)
    total = sum(s for _, s, _ in gpu)
    kinds: dict[str, float] = {}
    for _, _, split in gpu:
        for kind, seconds in split.items():
            kinds[kind] = kinds.get(kind, 0.0) + seconds
    rules = ", ".join(f"`{r}`" for r in sorted({job.rule for job, _, _ in gpu}))
    shares = "; ".join(f"{kind} {seconds / total:.0%}" for kind, seconds in
                       sorted(kinds.items(), key=lambda item: -item[1]))  # fmt: skip
    lines = [
        f"`{configfile}`: {len(gpu)} GPU jobs ({rules}), {total / 3600:.2f} GPU-hours expected, "
        f"the longest {max(s for _, s, _ in gpu) / 60:.1f} min. Of the GPU time: {shares}.",
        "",
        "| GPUs | expected wall time |",
        "|---|---|",
    ]
    for devices in DEVICES:
        wall = sum(longest_first(phase, devices) for _, phase in sorted(phases.items()))
        lines.append(f"| {devices} | {_minutes(wall)} |")
    host = [s for job, s, _ in sized if not job.gpus]
    if host:
        lines += [
            "",
            f"Beside them, on host CPUs: {len(host)} jobs of {sum(host) / 60:.1f} minutes in "
            f"all, the longest {max(host) / 60:.1f} min.",
        ]
    return lines


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:,.1f} min" if seconds < 5400 else f"{seconds / 3600:,.1f} h"


def goal_line(jobs: list[DryJob]) -> str:
    """Whether paper A's grid meets the goal on its GPUs."""
    grid = [s for job, s, _ in expected_jobs("configs/paper.yaml", jobs)
            if job.rule == "train_synthetic"]  # fmt: skip
    name, devices, limit = GOAL
    wall = longest_first(grid, devices)
    verdict = "met" if wall <= limit else "not met"
    return (
        f"Goal: {name} within {limit // 60} minutes on {devices} GPUs. Expected: "
        f"{_minutes(wall)}, so {verdict} with the measured costs and the assumptions above."
    )


def grid_batching(config: dict) -> tuple[int, int, int, float]:
    """Batched models, their fewest and most replicas, and model-steps (millions) of the
    listed grid of ``config``'s paper A sweeps (the convergence check not counted)."""
    section = config["synthetic"]
    stage = StageSettings.from_config(section, config["seed"], config["engine"])
    sizes, steps = [], 0
    for name in section["sweeps"]:
        spec = sweep_spec(section, name)
        for members in replica_groups(spec, stage).values():
            cfg = stage.train_config(spec, max(r.T for r in members))
            sizes.append(len(members))
            steps += cfg.steps * (1 + cfg.extra_budgets)
    return len(sizes), min(sizes), max(sizes), steps / 1e6


def engine_line(jobs: list[DryJob]) -> str:
    """How paper A's GPU rates were measured, against how configs/paper.yaml trains."""
    grid = json.loads(GRID.read_text())
    model = job_costs("configs/paper.yaml")
    engine = model.config["engine"]
    models, fewest, most, steps = grid_batching(model.config)
    bound = sum(
        model.work(job.rule, job.wildcards, 1)["synthetic_step"]
        for job in jobs
        if job.rule == "train_synthetic"
    )
    timed = [m for s in grid["sweeps"].values() for m in s["models"]]
    measured = sum(s["steps"] for s in grid["sweeps"].values()) / 1e6
    graphs = {True: "CUDA graphs", False: "no CUDA graphs"}

    def group_by(keys: list[str]) -> str:
        return f"`group_by: [{', '.join(keys)}]`"

    return (
        f"Paper A's rates were measured with precision {grid['precision']}, "
        f"{graphs[grid['cuda_graph']]} and {group_by(grid['group_by'])} ({len(timed)} batched "
        f"models of {min(m['replicas'] for m in timed)}–{max(m['replicas'] for m in timed)} "
        f"replicas, {measured:.2f} M model-steps for the grid). `configs/paper.yaml` trains "
        f"with precision {engine['precision']}, {graphs[engine['cuda_graph']]} and "
        f"{group_by(engine['synthetic']['group_by'])}: {models} batched models of "
        f"{fewest}–{most} replicas, {steps:.2f} M model-steps for the grid, {bound / 1e6:.1f} M "
        "with the convergence check's upper bound. A step of a model that small has not been "
        "timed on a GPU, in either engine."
    )


def calibration_table() -> str:
    """The cost model's measurements by kind: how many, and the spread of measured over
    modelled seconds (1: the rate's own measurement)."""
    measured = json.loads((ROOT / costs.COSTS_FILE).read_text())["measured"]
    kinds: dict[tuple[str, str], list[float]] = {}
    for row in measured:
        kinds.setdefault((row["device"], row["kind"]), []).append(row["ratio"])
    rows = [
        {
            "device": device.upper(),
            "measured": kind.replace("_", " "),
            "jobs": str(len(ratios)),
            "measured / modelled": f"{min(ratios):.2f} – {max(ratios):.2f}",
        }
        for (device, kind), ratios in kinds.items()
    ]
    return markdown(rows)


def replace_block(text: str, name: str, body: str) -> str:
    """``text`` with the lines between its ``<!-- {name}:begin -->`` and ``:end`` markers
    replaced by ``body``."""
    begin, end = f"<!-- {name}:begin -->\n", f"<!-- {name}:end -->"
    head, rest = text.split(begin, 1)
    return head + begin + body + end + rest.split(end, 1)[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write into docs/cluster.md")
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/cluster.md differs")
    args = parser.parse_args()
    paper = dry_run("configs/paper.yaml")
    scale = dry_run("configs/scale.yaml")
    paper_a = [j for j in paper if j.rule == "train_synthetic"]
    table = request_table(paper)
    figures = "\n".join(
        [*plan("configs/paper.yaml", paper_a), "", engine_line(paper), "", goal_line(paper), "",
         *plan("configs/scale.yaml", scale)]
    ) + "\n"  # fmt: skip
    text = DOC.read_text()
    new = replace_block(text, "cluster-costs", calibration_table())
    new = replace_block(replace_block(new, "cluster-table", table), "cluster-plan", figures)
    if args.check:
        print(f"{DOC} is {'current' if new == text else 'stale: run --write'}")
        sys.exit(0 if new == text else 1)
    if args.write:
        DOC.write_text(new)
    print(table + "\n" + figures)


if __name__ == "__main__":
    main()
