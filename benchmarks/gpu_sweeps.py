"""Time configs/paper.yaml's synthetic sweeps on a GPU, without Snakemake.

The machine with the GPU may lack Snakemake, so the config is resolved (schema defaults
filled, as the workflow does) where Snakemake is installed, and this script reads that JSON:

    python benchmarks/gpu_sweeps.py resolve configs/paper.yaml resolved.json   # with Snakemake
    python benchmarks/gpu_sweeps.py run resolved.json --aot heads --synthetic heads \\
        --max-steps 5000 --examples 10000 --out timings.csv                       # on the GPU

`--max-steps` caps paper A's steps per model (so a sweep fits a short lease) and
`--examples` keeps one T of its grid; the output states both, with the full step count and
the wall time that the measured seconds per step extrapolate to. Paper B sweeps always run
in full. Prints one line per sweep.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pandas as pd
import yaml


def resolve(config_path: str, out: str) -> None:
    """Validate ``config_path`` against the schema (filling defaults) and write it as JSON."""
    from snakemake.utils import validate

    root = Path(__file__).resolve().parents[1]
    config = yaml.safe_load(Path(config_path).read_text())
    validate(config, str(root / "workflow" / "schemas" / "config.schema.yaml"))
    Path(out).write_text(json.dumps(config))


def _paper_a(config: dict, name: str, max_steps: int, examples: int | None, device) -> dict:
    from dataclasses import replace

    from memcap.synthetic.settings import StageSettings, sweep_spec
    from memcap.synthetic.sweep import run_sweep

    section = config["synthetic"]
    full = sweep_spec(section, name)
    grid = (examples,) if examples else full.examples
    spec = replace(full, examples=grid)
    stage = StageSettings.from_config(section, config["seed"])
    planned = [stage.train_config(spec, t).steps for t in grid]
    # epochs 0: the step count is max_steps whatever T (warm-up and decay scale with it).
    capped = replace(spec, train={**(spec.train or {}), "steps": max_steps, "epochs": 0})
    start = time.perf_counter()
    result = run_sweep(capped if max_steps else spec, stage, device)
    wall = time.perf_counter() - start
    run_steps = int(result.table["steps_run"].groupby(result.table["T"]).max().sum())
    return {
        "paper": "A",
        "sweep": name,
        "replicas": len(result.table),
        "T_grid": list(grid),
        "steps_run": run_steps,
        "steps_planned": int(sum(planned)),
        "wall_s": round(wall, 1),
        "extrapolated_wall_s": round(wall / max(run_steps, 1) * sum(planned), 1),
    }


def _paper_b(config: dict, name: str, device) -> dict:
    from memcap.aot.settings import StageSettings
    from memcap.aot.sweep import run_sweep

    section = config["aot"]
    stage = StageSettings.from_config(section, config["seed"])
    start = time.perf_counter()
    result = run_sweep(name, section["sweeps"][name], stage, device)
    wall = time.perf_counter() - start
    return {
        "paper": "B",
        "sweep": name,
        "replicas": len(result.table),
        "steps_run": int(result.table["steps_run"].max()),
        "wall_s": round(wall, 1),
        "mean_accuracy": round(float(result.table["accuracy"].mean()), 3),
    }


def run(args: argparse.Namespace) -> None:
    import torch

    from memcap.devices import resolve_device

    config = json.loads(Path(args.config).read_text())
    device = resolve_device("auto")
    name = torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu"
    jobs = [("A", sweep) for sweep in args.synthetic] + [("B", sweep) for sweep in args.aot]
    rows = []
    for paper, sweep in jobs:
        if paper == "A":
            row = _paper_a(config, sweep, args.max_steps, args.examples, device)
        else:
            row = _paper_b(config, sweep, device)
        rows.append(row | {"device": name})
        print(rows[-1], flush=True)
        pd.DataFrame(rows).to_csv(args.out, index=False)  # after each sweep: a cut run keeps it


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    resolving = commands.add_parser("resolve")
    resolving.add_argument("config")
    resolving.add_argument("out")
    running = commands.add_parser("run")
    running.add_argument("config")
    running.add_argument("--aot", nargs="*", default=[])
    running.add_argument("--synthetic", nargs="*", default=[])
    running.add_argument("--max-steps", type=int, default=0)
    running.add_argument("--examples", type=int, default=None)
    running.add_argument("--out", default="gpu_sweeps.csv")
    args = parser.parse_args()
    if args.command == "resolve":
        resolve(args.config, args.out)
    else:
        run(args)


if __name__ == "__main__":
    main()
