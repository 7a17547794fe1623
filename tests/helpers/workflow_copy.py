"""A copy of the repository for a Snakemake run in a temporary folder (the workflow, configs,
package and committed files, without results, logs, caches, environments or a previous run's
report and benchmark files), and a Snakemake run that must succeed."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
# Generated or environment folders that the copy leaves behind.
SKIP = {".venv", ".git", ".snakemake", "results", "logs", ".pytest_cache", ".ruff_cache"}


def copy_workflow(dest: Path) -> None:
    """Copy the repository to ``dest`` (which must not exist), leaving out what a run makes."""

    def ignore(directory: str, names: list[str]) -> set[str]:
        top = Path(directory) == ROOT
        skipped = {n for n in names if n in SKIP and top or n == "__pycache__"}
        if Path(directory) == ROOT / "reports":
            skipped |= {n for n in names if n != ".gitkeep"}
        if Path(directory) == ROOT / "benchmarks":
            skipped.add("results")
        return skipped

    shutil.copytree(ROOT, dest, ignore=ignore)


def run_snakemake(
    workdir: Path, *args: str, timeout: int = 1500, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``snakemake *args`` in ``workdir``; fails the test with the output's tail unless it
    succeeds."""
    result = subprocess.run(
        [SNAKEMAKE, *args], cwd=workdir, capture_output=True, text=True, timeout=timeout, env=env
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    return result
