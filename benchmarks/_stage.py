"""What the whole-stage benchmarks share: their options, the resolved config, one process
per sweep, the machine's matmul speed, and the other tree's cached timings."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def resolve(config_path: Path, root: Path = ROOT) -> dict:
    """The config with the schema of the tree at ``root`` filled in, as its workflow does."""
    import yaml

    from memcap.config_schema import validate_schema

    config = yaml.safe_load(config_path.read_text())
    validate_schema(config, root / "workflow" / "schemas" / "config.schema.yaml")
    return config


def resolve_before(config_path: Path, before: Path) -> dict:
    """The config as the tree at ``before`` reads it: its own copy of a config of this tree
    (same path; its keys may be of an older shape), else ``config_path`` itself."""
    path = config_path.resolve()
    if path.is_relative_to(ROOT) and (before / path.relative_to(ROOT)).exists():
        path = before / path.relative_to(ROOT)
    return resolve(path, before)


def run_tree(
    script: str, src: Path, config_json: Path, sweeps: list[str], work: Path, tag: str
) -> dict:
    """CPU seconds per sweep of the package under ``src``; each sweep in a fresh process
    running ``script worker CONFIG SWEEP TABLE``, whose last stdout line is JSON with "cpu"."""
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    out = {}
    for sweep in sweeps:
        table = work / f"{tag}_{sweep}.csv"
        args = [sys.executable, script, "worker", str(config_json), sweep, str(table)]
        done = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{tag} {sweep} failed:\n{done.stderr[-3000:]}")
        out[sweep] = json.loads(done.stdout.strip().splitlines()[-1])["cpu"]
        print(f"{tag:>6} {sweep:<12} {out[sweep]:8.1f} s CPU", flush=True)
    return out


def matmul_gflops() -> float:
    """Best of five single-thread float32 1024² matmuls, GFLOP/s."""
    import torch

    torch.set_num_threads(1)
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    a @ b
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * 1024**3 / best / 1e9


def cached(path: Path, sweeps: list[str]) -> dict | None:
    """The other tree's timings of an earlier run (same --keep folder), if it has every sweep."""
    if not path.exists():
        return None
    cpu = json.loads(path.read_text())
    if not all(sweep in cpu for sweep in sweeps):
        return None
    print(f"before: reusing {path}")
    return {sweep: cpu[sweep] for sweep in sweeps}


@dataclass(frozen=True)
class StageTimings:
    """Both trees' CPU seconds per sweep, and the folder holding their tables."""

    before: dict
    ours: dict
    sweeps: list[str]
    work: Path


def time_stage(script: str, section: str, description: str) -> StageTimings | None:
    """Parse the stage benchmarks' options, time ``--before`` and this tree sweep by sweep.

    None when there is nothing to compare (``--before-only``, or no ``--before``: ours is
    timed and its total printed)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--config", type=Path, default=ROOT / "config.yaml")
    parser.add_argument("--before", type=Path, help="another checkout to compare against")
    parser.add_argument("--sweeps", nargs="*", help="default: every sweep of the config")
    parser.add_argument(
        "--keep", type=Path, help="keep the tables here; --before's timings found here are reused"
    )
    parser.add_argument("--before-only", action="store_true", help="time only --before")
    args = parser.parse_args()
    config = resolve(args.config)
    sweeps = args.sweeps or list(config[section]["sweeps"])
    work = args.keep or Path(tempfile.mkdtemp(prefix=f"bench_{section}_stage_"))
    work.mkdir(parents=True, exist_ok=True)
    config_json = work / "config.json"
    config_json.write_text(json.dumps(config))
    print(f"single-thread float32 1024^2 matmul: {matmul_gflops():.0f} GFLOP/s", flush=True)
    before = None
    if args.before is not None:
        before_json = work / "before_config.json"
        before_json.write_text(json.dumps(resolve_before(args.config, args.before)))
        before = cached(work / "before_cpu.json", sweeps) or run_tree(
            script, args.before / "src", before_json, sweeps, work, "before"
        )
        (work / "before_cpu.json").write_text(json.dumps(before))
    if args.before_only:
        return None
    ours = run_tree(script, ROOT / "src", config_json, sweeps, work, "ours")
    if before is None:
        print(f"total {sum(ours.values()):.1f} s CPU")
        return None
    return StageTimings(before, ours, sweeps, work)
