"""The reading path from each paper's ``run_sweep`` to its first Adam step is the one
docs/development.md states (files and returning call sites, tests/helpers/step_path.py)."""

import re
from pathlib import Path

import pytest
from step_path import measure

ROOT = Path(__file__).resolve().parents[2]


def _stated() -> dict[str, tuple[int, int]]:
    text = " ".join((ROOT / "docs/development.md").read_text().split())
    found = re.search(r"paper A: (\d+) files and (\d+) call sites, paper B: (\d+) and (\d+)", text)
    assert found, "docs/development.md no longer states the step path's figures"
    a_files, a_returns, b_files, b_returns = map(int, found.groups())
    return {"synthetic": (a_files, a_returns), "aot": (b_files, b_returns)}


@pytest.mark.parametrize("paper", ["synthetic", "aot"])
def test_the_step_path_is_the_documented_one(paper):
    tracer = measure(paper)
    assert (len(tracer.files), len(tracer.returns)) == _stated()[paper]
    # no file more than now (the bar is 8: paper A's data keeps its module, as paper B's)
    assert len(tracer.files) <= {"synthetic": 9, "aot": 8}[paper]
