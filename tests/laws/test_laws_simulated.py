"""The law tests on seeds simulated from a known truth at the default run's noise
(tests/helpers/law_simulation.py): every outcome rate meets its requirement (the test's level,
or the power memcap.laws.power predicts), and docs/laws.md holds the table these runs give."""

from __future__ import annotations

import law_simulation
import pytest


@pytest.fixture(scope="module")
def table() -> list[law_simulation.Row]:
    return law_simulation.rows()


def test_every_simulated_rate_meets_its_requirement(table):
    failing = [row.markdown() for row in table if not row.ok]
    assert not failing, "\n".join(failing)
    # the rows that state a requirement check it; the unweighted fits are shown beside
    assert sum(row.check is not None for row in table) >= 14


def test_docs_hold_the_simulated_table(table):
    text = law_simulation.DOCS.read_text()
    assert law_simulation.markdown(table) in text, (
        "docs/laws.md is out of date: run `.venv/bin/python tests/helpers/law_simulation.py`"
    )
