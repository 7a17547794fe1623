"""Time configs/paper.yaml's paper B sweeps on a GPU, without Snakemake.

The machine with the GPU may lack Snakemake, so the config is resolved (schema defaults
filled, as the workflow does) where Snakemake is installed, and this script reads that JSON:

    python benchmarks/gpu_sweeps.py resolve configs/paper.yaml resolved.json   # with Snakemake
    python benchmarks/gpu_sweeps.py run resolved.json --aot heads --out timings.csv  # on the GPU

Paper B sweeps run in full. Paper A's grid is timed by ``benchmarks/paper_a_grid.py``
(which reads the same resolved JSON). Prints one line per sweep.
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


def _paper_b(config: dict, name: str, device) -> dict:
    from memcap.aot.settings import StageSettings
    from memcap.aot.sweep import run_sweep

    section = config["aot"]
    stage = StageSettings.from_config(section, config["seed"], config["engine"])
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
    rows = []
    for sweep in args.aot:
        rows.append(_paper_b(config, sweep, device) | {"device": name})
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
    running.add_argument("--out", default="gpu_sweeps.csv")
    args = parser.parse_args()
    if args.command == "resolve":
        resolve(args.config, args.out)
    else:
        run(args)


if __name__ == "__main__":
    main()
