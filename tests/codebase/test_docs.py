"""docs/ stays a reference: pages under 300 lines, generated figures current, and the module map
naming every module, each under 400 lines."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "memcap"


def test_no_page_over_300_lines():
    long = {
        p.name: n
        for p in (ROOT / "docs").glob("*.md")
        if (n := len(p.read_text().splitlines())) > 300
    }
    assert not long, long


def test_the_module_map_names_every_module():
    text = (ROOT / "docs" / "development.md").read_text()
    mapped = set()
    sections = re.findall(
        r"\*\*(memcap[\w.]*)\*\*\n\n\| module \| what it is \|\n\|---\|---\|\n((?:\|.*\|\n)+)", text
    )
    for package, rows in sections:
        mapped |= {f"{package}.{row.split('|')[1].strip()}" for row in rows.splitlines()}
    modules = {
        ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts)
        for p in PACKAGE.rglob("*.py")
        if p.stem != "__init__"
    }
    assert modules - mapped == set(), "modules missing from docs/development.md's module map"
    assert mapped - modules == set(), "docs/development.md maps modules that do not exist"


def test_no_module_over_400_lines():
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 400
    }
    assert not long, long


def test_the_default_runs_generated_figures_are_current():
    """The default run's figures in docs/ are what tests/helpers/docs_figures.py writes from the
    stored run (tests/data/default_run)."""
    result = subprocess.run(
        [sys.executable, "tests/helpers/docs_figures.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
