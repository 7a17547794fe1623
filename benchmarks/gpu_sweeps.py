"""Train configs/paper.yaml's sweeps end to end on a GPU, without Snakemake.

The machine with the GPU may lack Snakemake, so the config is resolved (schema defaults
filled, as the workflow does) where Snakemake is installed, and this script reads that JSON:

    python benchmarks/gpu_sweeps.py resolve configs/paper.yaml resolved.json   # with Snakemake
    python benchmarks/gpu_sweeps.py run resolved.json --aot heads --out timings.csv  # on the GPU
    python benchmarks/gpu_sweeps.py run resolved.json --synthetic context_size \
        --json benchmarks/gpu/paper_a_sweep.json --commit <sha>                      # on the GPU
    python benchmarks/gpu_sweeps.py laws benchmarks/gpu/paper_a_sweep.json          # anywhere

Sweeps run in full. A paper A sweep writes one JSON: device, commit, sweep, seeds, wall
seconds, the training settings, one row per replica (setting, seed and T), one row per setting
and seed (capacity, as the synthetic stage's summary defines it) and the sweep's laws as
``memcap.synthetic.laws`` decides them; ``laws`` decides them again from the stored rows (for
a later version of the law checks). Paper A's whole grid is timed by
``benchmarks/paper_a_grid.py`` (which reads the same resolved JSON). Prints one line per sweep.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pandas as pd
import yaml


def resolve(config_path: str, out: str) -> None:
    """The config a ``--configfile config_path`` run sees (config.yaml updated by it, as
    Snakemake merges them), validated against the schema (defaults filled), as JSON."""
    from snakemake.utils import update_config, validate

    root = Path(__file__).resolve().parents[1]
    config = yaml.safe_load((root / "config.yaml").read_text())
    update_config(config, yaml.safe_load(Path(config_path).read_text()))
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


def _paper_a(config: dict, name: str, device, commit: str) -> dict:
    """Train and certify every replica of paper A's sweep ``name``; its rows and laws."""
    import torch

    from memcap.synthetic.settings import StageSettings, sweep_spec
    from memcap.synthetic.sweep import run_sweep

    section = config["synthetic"]
    spec = sweep_spec(section, name)
    stage = StageSettings.from_config(section, config["seed"], config["engine"])
    start = time.perf_counter()
    result = run_sweep(spec, stage, device)
    wall = time.perf_counter() - start
    rows = result.table
    return {
        "paper": "A",
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "commit": commit,
        "torch": torch.__version__,
        "sweep": name,
        "seeds": stage.replicate_seeds(spec),
        "wall_seconds": round(wall, 1),
        "engine": config["engine"],
        "settings": {key: value for key, value in section["sweeps"][name].items()},
        "rows": json.loads(rows.to_json(orient="records")),
        **_decided(rows),
    }


def _decided(rows: pd.DataFrame) -> dict:
    """Capacity per setting and seed, and the laws decided on them."""
    from memcap.synthetic.laws import law_table
    from memcap.synthetic.summary import capacity_table

    capacity = capacity_table(rows)
    return {
        "capacity": json.loads(capacity.to_json(orient="records")),
        "laws": json.loads(law_table(capacity).to_json(orient="records")),
    }


def laws(path: str) -> None:
    """Decide the laws again from a stored sweep JSON's rows, in place."""
    stored = json.loads(Path(path).read_text())
    stored |= _decided(pd.DataFrame(stored["rows"]))
    Path(path).write_text(json.dumps(stored, indent=1) + "\n")
    for law in stored["laws"]:
        print(law)


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
    if args.synthetic:
        sweep = _paper_a(config, args.synthetic, device, args.commit)
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(sweep, indent=1) + "\n")
        print({k: sweep[k] for k in ("sweep", "device", "wall_seconds", "seeds")}, flush=True)


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
    running.add_argument("--synthetic", default=None, help="one paper A sweep, end to end")
    running.add_argument("--json", default="benchmarks/gpu/paper_a_sweep.json")
    running.add_argument("--commit", default="unknown")
    deciding = commands.add_parser("laws")
    deciding.add_argument("json")
    args = parser.parse_args()
    if args.command == "resolve":
        resolve(args.config, args.out)
    elif args.command == "laws":
        laws(args.json)
    else:
        run(args)


if __name__ == "__main__":
    main()
