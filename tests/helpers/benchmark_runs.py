"""Running a script of benchmarks/ the way the tests do: one thread, no progress bars, result
files in a temporary folder (benchmarks/results/ keeps the real runs')."""

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(tempfile.mkdtemp(prefix="memcap_bench_results_"))
atexit.register(shutil.rmtree, RESULTS, ignore_errors=True)


def run_benchmark(script: str, *args: str) -> subprocess.CompletedProcess:
    """``benchmarks/<script> args`` from the repository root; output captured as text."""
    command = [sys.executable, str(ROOT / "benchmarks" / script), *args]
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "TQDM_DISABLE": "1",
        "MEMCAP_BENCH_RESULTS": str(RESULTS),
    }
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
