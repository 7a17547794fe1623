"""A copy of the repository for a Snakemake run in a temporary folder: the workflow, configs,
package and committed files, without results, logs, caches, environments or a previous run's
report and benchmark files."""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
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
