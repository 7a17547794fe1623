"""Static checks of the workflow and the code: snakemake --lint, snakefmt, ruff."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_snakemake_lint_is_clean():
    for configfile in ("config.yaml", "configs/test.yaml"):
        result = _run(str(BIN / "snakemake"), "--lint", "--configfile", configfile)
        output = result.stdout + result.stderr
        assert result.returncode == 0, output[-3000:]
        assert "Congratulations, your workflow is in a good condition!" in output, output[-3000:]


def test_snakefmt_check_passes():
    result = _run(str(BIN / "snakefmt"), "--check", "Snakefile", "rules")
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]


def test_ruff_lint_and_format_are_clean():
    ruff = shutil.which("ruff", path=str(BIN)) or "ruff"
    paths = ["src", "tests", "benchmarks", "workflow/scripts"]
    lint = _run(ruff, "check", *paths)
    assert lint.returncode == 0, lint.stdout[-3000:]
    fmt = _run(ruff, "format", "--check", *paths)
    assert fmt.returncode == 0, fmt.stdout[-3000:]
