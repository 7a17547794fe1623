"""The report's certified-capacity table says, row by row, which ranks sit at their ceiling."""

import numpy as np
import pandas as pd

from memcap.assumptions.verdicts import LayerEvidence, Outcome, layer_verdicts
from memcap.capacity.ceiling import AT_CEILING
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


def _rows(**columns) -> pd.DataFrame:
    """Capacity rows of bert / layer 0 (T = 100, n = 4, d = 30), H = 1..4, read resolved."""
    frame = pd.DataFrame({"model": "bert", "layer": 0, "H": [1, 2, 3, 4], "T": 100, "n": 4,
                          "d": 30, "last_kept": 1e-3, "first_dropped": 1e-12, "floor": 2e-7,
                          **columns})  # fmt: skip
    return frame.assign(
        rank_high=frame["certified"], rank_low=columns.get("rank_low", frame["certified"])
    )


def test_each_row_says_whether_it_measures_the_embeddings():
    # H = 1..4 on T = 100 examples of d = 30: ceilings 30, 60, 90, 100
    own = _rows(certified=[30, 59, 90, 100], contexts="own")
    shared = _rows(certified=[4, 7, 9, 9], rank_low=[4, 7, 9, 1], contexts="shared",
                   shared_context=0, draw=0, spread_runs=[25, 25, np.nan, 25],
                   spread_median=[4, 7, np.nan, 10], spread_min=[4, 6, np.nan, 8],
                   spread_max=[4, 7, np.nan, 13], spread_resolved=[25, 20, np.nan, 3])  # fmt: skip
    later = shared.assign(draw=1, certified=1, rank_low=1, rank_high=1)  # not the first run
    section = _section(pd.concat([own, shared, later]))
    columns = section.capacity.columns
    rows = section.capacity.rows
    # Theorem 1 applies at n = 4: it grants min(T, H·3 + 1)
    assert section.verdicts.theorem.outcome is Outcome.APPLIES
    granted = columns.index("bound Theorem 1 grants here")
    assert [row[granted] for row in rows] == ["4", "7", "10", "13"]
    readings = [row[columns.index("own: reading")] for row in rows]
    assert readings[0] == readings[2] == readings[3] == AT_CEILING
    assert (
        readings[1]
        == "59 below its ceiling min(T, H·d) = 60, resolved: a measurement of the embeddings"
    )
    assert not section.capacity_saturated
    shared_readings = [row[columns.index("shared: reading")] for row in rows]
    assert shared_readings[0].startswith("= H(n−1)+1 = 4 below both ceilings, certified")
    assert shared_readings[2].startswith("9 below min(T, H(n−1)+1) = 10, resolved")
    assert shared_readings[3].startswith("≥ 9 certified, at most min(T, H(n−1)+1) = 13")
    # from the certified count up to the most one shared context allows
    assert [row[columns.index("one shared context")] for row in rows] == [
        "4",
        "7",
        "9",
        "9–13",
    ]  # resolved at 9: one number
    gaps = [row[columns.index("shared: gap")] for row in rows]
    assert gaps[0] == "1.0e−3 / 1.0e−12 = 1e+09× (9.00 decades); floor 2.0e−7: +3.7 / −5.3"
    spread = [row[columns.index("shared: median [range] over contexts × draws")] for row in rows]
    assert spread == ["4 [4–4] of 25; 25 resolved", "7 [6–7] of 25; 20 resolved", "",
                      "10 [8–13] of 25; 3 resolved"]  # fmt: skip


def test_what_theorem_1_grants_never_exceeds_the_examples_used():
    # T = 10 examples: H·3 + 1 passes T from H = 4 on
    own = _rows(certified=[4, 7, 10, 10], contexts="own").assign(T=10)
    section = _section(own)
    granted = section.capacity.columns.index("bound Theorem 1 grants here")
    assert [row[granted] for row in section.capacity.rows] == ["4", "7", "10", "10"]
    assert section.capacity_saturated is False


def test_a_table_without_the_reading_columns_gets_no_reading():
    capacity = pd.DataFrame({"model": "bert", "layer": "0", "H": [1, 2], "certified": [5, 9]})
    section = _section(capacity)
    assert section.capacity is not None and "own: reading" not in section.capacity.columns
    granted = section.capacity.columns.index("bound Theorem 1 grants here")
    # without T the layer's own examples (T = 100) cap the grant
    assert [row[granted] for row in section.capacity.rows] == ["4", "7"]
