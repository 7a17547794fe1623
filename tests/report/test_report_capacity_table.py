"""The report's certified-capacity table says, row by row, which ranks sit at their ceiling."""

import pandas as pd

from memcap.assumptions.verdicts import LayerEvidence, Outcome, layer_verdicts
from memcap.report.cards import add_capacity
from memcap.report.context import LayerSection

EVIDENCE = LayerEvidence(
    model="bert",
    layer="0",
    T=100,
    n=4,
    d=30,
    samples=200,
    context_full_rank_frac=1.0,
    kruskal_p_n=1.0,
    general_position_p_d=1.0,
    kruskal_rank_estimate=30,
    contexts_checked=100,
    worst_margin=5.0,
    context_outcome=Outcome.APPLIES,
    context_counts={"applies": 100},
    kruskal_outcome_n=Outcome.APPLIES,
    general_position_outcome_d=Outcome.APPLIES,
    profile={2: 1.0, 4: 1.0, 30: 1.0},
)


def _section(capacity: pd.DataFrame) -> LayerSection:
    section = LayerSection(layer_verdicts(EVIDENCE))
    add_capacity(section, capacity)
    return section


def test_each_row_says_whether_it_measures_the_embeddings():
    # H = 1..4 on T = 100 examples of d = 30: ceilings 30, 60, 90, 100
    capacity = pd.DataFrame(
        {"model": "bert", "layer": 0, "H": [1, 2, 3, 4], "certified": [30, 59, 90, 100],
         "T": 100, "n": 4, "d": 30}
    )  # fmt: skip
    shared = capacity.assign(contexts="shared", certified=[4, 7, 9, 13])
    section = _section(pd.concat([capacity.assign(contexts="own"), shared]))
    columns = section.capacity.columns
    # Theorem 1 applies at n = 4: the bound it grants is H·3 + 1
    assert section.verdicts.theorem.outcome is Outcome.APPLIES
    granted = columns.index("bound Theorem 1 grants here")
    assert [row[granted] for row in section.capacity.rows] == ["4", "7", "10", "13"]
    readings = [row[columns.index("own: reading")] for row in section.capacity.rows]
    assert readings[0].startswith("at ceiling: Z has full column rank H·d = 30")
    assert readings[1] == "below its ceiling 60: a measurement of the embeddings"
    assert "the readout's limit, not a property of the data" in readings[2]
    assert readings[3] == "at ceiling: needs T > H·d to say more"
    assert not section.capacity_saturated
    shared_readings = [row[columns.index("shared: reading")] for row in section.capacity.rows]
    assert shared_readings[2] == "below min(T, H(n−1)+1) = 10: a measurement of the embeddings"
    assert shared_readings[3].startswith("reaches min(T, H(n−1)+1) = 13")


def test_a_table_without_the_examples_used_gets_no_reading():
    capacity = pd.DataFrame({"model": "bert", "layer": "0", "H": [1, 2], "certified": [5, 9]})
    section = _section(capacity)
    assert section.capacity is not None and "own: reading" not in section.capacity.columns
