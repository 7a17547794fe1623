"""Running a script of benchmarks/ the way the tests do: one thread, no progress bars."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_benchmark(script: str, *args: str) -> subprocess.CompletedProcess:
    """``benchmarks/<script> args`` from the repository root; output captured as text."""
    command = [sys.executable, str(ROOT / "benchmarks" / script), *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TQDM_DISABLE": "1"}
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
