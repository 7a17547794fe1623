"""Time the scale audit (configs/scale.yaml, issue 25): every block of each model, one GPU.

Runs the Snakemake workflow on the config (``--run``; else reads a finished run's outputs)
and writes one JSON: the device, the commit, and per model its sizes (parameters, d, blocks,
T, n, S) with the seconds of each stage and the peak GPU memory, all read from what the run
left - the rules' benchmark files (wall seconds per job), the extraction's provenance
(context-rank seconds per layer, streamed during the forward; peak GPU memory), the depth
table (Kruskal seconds per layer) and the check job's log (its peak GPU memory).

    python benchmarks/gpu_scale_audit.py --run --cores 16       # on the GPU machine
    python benchmarks/gpu_scale_audit.py --root /path/to/run    # read a finished run

Prints one line per model; ``total_seconds`` is the sum of the model's job wall times
(extraction, checks and, when the config runs it, certified capacity).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
PEAK_LINE = re.compile(r"peak GPU memory: ([0-9.]+|None) GB")


def job_seconds(root: Path, rule: str, model: str) -> float | None:
    """Wall seconds of a rule's job for ``model`` (its Snakemake benchmark file), if it ran."""
    path = root / "benchmarks" / "results" / rule / f"{model}.tsv"
    return float(pd.read_csv(path, sep="\t")["s"].iloc[0]) if path.is_file() else None


def logged_peak_gb(path: Path) -> float | None:
    """The peak GPU memory a check job logged (None: not on CUDA, or no such line)."""
    found = PEAK_LINE.findall(path.read_text()) if path.is_file() else []
    return float(found[-1]) if found and found[-1] != "None" else None


def model_timings(root: Path, model: str, samples: int) -> dict[str, Any]:
    """One model's sizes, seconds per stage and peak GPU memory, from a finished run."""
    extract = root / "results" / "extract" / model
    records = [json.loads(p.read_text()) for p in sorted(extract.glob("*/provenance.json"))]
    if not records:
        raise FileNotFoundError(f"no extraction of '{model}' under {extract}: run it first")
    first = records[0]
    depth = pd.read_csv(root / "results" / "assumptions" / model / "depth.csv")
    stages = {
        "extract_seconds": job_seconds(root, "extract_model", model),
        "check_seconds": job_seconds(root, "check_assumptions", model),
        "capacity_seconds": job_seconds(root, "certify_real_capacity", model),
    }
    peaks = [first.get("peak_gpu_memory_gb")]
    peaks.append(logged_peak_gb(root / "logs" / "check_assumptions" / f"{model}.log"))
    peaks = [p for p in peaks if p is not None]
    return {
        "params": first["parameters"],
        "precision": first["precision"],
        "d": first["d"],
        "blocks": first["depth"],
        "layers": len(records),
        "T": first["T"],
        "n": first["n"],
        "S": samples,
        **stages,
        "context_rank_seconds": round(sum(r.get("context_rank_seconds") or 0 for r in records), 2),
        "kruskal_seconds": round(float(depth["kruskal_seconds"].sum()), 2),
        "total_seconds": round(sum(s for s in stages.values() if s is not None), 2),
        "peak_gpu_memory_gb": max(peaks) if peaks else None,
        "device": first["device"],
    }


def commit(root: Path) -> str | None:
    """The checkout's commit (None outside a git checkout)."""
    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True)
    return done.stdout.strip() or None


def device_name() -> str:
    """The GPU's name, or the CPU."""
    import torch

    return torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"


def audit(config_path: Path, root: Path) -> dict[str, Any]:
    """The JSON record of a finished run of ``config_path`` under ``root``."""
    config = yaml.safe_load(config_path.read_text())
    samples = int(config.get("assumptions", {}).get("samples", 500))
    models = {
        m["name"]: model_timings(root, m["name"], samples) for m in config["extract"]["models"]
    }
    return {
        "config": str(config_path),
        "device": device_name(),
        "commit": commit(ROOT),
        "models": models,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "scale.yaml")
    parser.add_argument("--root", type=Path, default=ROOT, help="where the run's files are")
    parser.add_argument("--run", action="store_true", help="run the workflow first")
    parser.add_argument("--cores", type=int, default=16)
    parser.add_argument(
        "--target", nargs="*", default=[], help="Snakemake targets (default: the whole run)"
    )
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "gpu" / "scale_audit.json"
    )
    args = parser.parse_args()
    config_path = args.config.resolve()
    wall = None
    if args.run:
        # `python -m snakemake`: on the GPU machine Snakemake comes as wheels installed with
        # --target (docs/gpu.md), whose console script is not beside the interpreter.
        snakemake = [sys.executable, "-m", "snakemake"]
        command = [*snakemake, "-s", str(ROOT / "Snakefile"), "-d", str(args.root)]
        start = time.perf_counter()
        subprocess.run(
            [*command, "--cores", str(args.cores), "--configfile", str(config_path), *args.target],
            check=True,
        )
        wall = round(time.perf_counter() - start, 1)
    record = audit(config_path, args.root.resolve()) | {"snakemake_wall_seconds": wall}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    for name, row in record["models"].items():
        print(
            f"{name}: {row['params'] / 1e9:.2f} B params, d = {row['d']}, {row['blocks']} blocks, "
            f"T = {row['T']}, n = {row['n']}, S = {row['S']}: extract {row['extract_seconds']} s "
            f"(context ranks {row['context_rank_seconds']} s), Kruskal {row['kruskal_seconds']} s, "
            f"total {row['total_seconds']} s, peak GPU {row['peak_gpu_memory_gb']} GB"
        )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
