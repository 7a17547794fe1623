"""Helpers of the config tests: change one key of a parsed config, dry-run a config."""

import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def set_key(config: dict, path: list, value) -> dict:
    """Set ``config[path[0]][path[1]]...`` to ``value``; return the config."""
    node = config
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return config


def dry_run(config: dict, tmp_path: Path) -> tuple[subprocess.CompletedProcess, str]:
    """`snakemake -n` on ``config`` written to a file; the result and its whole output."""
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    snakemake = Path(sys.executable).parent / "snakemake"
    result = subprocess.run(
        [str(snakemake), "-n", "--configfile", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return result, result.stdout + result.stderr
