"""What the whole-stage benchmarks share: the resolved config, one process per sweep, the
machine's matmul speed, and the other tree's cached timings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def resolve(config_path: Path) -> dict:
    """The config with the schema's defaults filled in, as the workflow validates it."""
    import yaml

    from memcap.config_schema import validate_schema

    config = yaml.safe_load(config_path.read_text())
    validate_schema(config, ROOT / "workflow" / "schemas" / "config.schema.yaml")
    return config


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
