"""How a paper's laws table reads in the report (memcap.report.scaling): p-values at a
permutation floor as bounds, Holm's column, power and seeds beside inconclusive tests, the
caveat on a verdict, untestable laws apart, and the multiplicity note."""

from __future__ import annotations

import pandas as pd

from memcap.report.scaling import law_notes, multiplicity, verdict_tables


def _laws() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "law": ["grows with n", "saturates in d_h beyond n", "linear in H", "alike"],
            "sweep": ["context_size", "head_dim", "low_dim", "aot_vs_mlp"],
            "curve": ["shared", "shared", "aot", "d=10"],
            "criterion": ["trend", "non-superiority", "lack of fit", "TOST"],
            "measured": ["J = 236", "-8%", "2 values", "-26%"],
            "outcome": ["holds", "inconclusive", "untestable on this grid", "fails"],
            "holds": [True, False, False, False],
            "test": ["Jonckheere–Terpstra", "non-superiority t", "none", "TOST"],
            "statistic": [236.0, 1.2, None, -23.0],
            "p_value": [0.0001, 0.03, None, 0.999],
            "p_floor": [0.0001, 0.0, 0.0, 0.0],
            "p_holm": [0.0003, 0.06, None, 0.999],
            "power": [None, 0.17, None, None],
            "seeds_needed": [None, float("inf"), None, None],
            "power_at": ["", "no gain", "", ""],
            "caveat": ["", "", "", "trained 1/8 of the authors' budget"],
        }
    )


def test_compact_table_prints_bounds_holm_power_and_seeds():
    compact, full = verdict_tables(_laws())
    assert compact.columns[-4:] == ("p_value", "p (Holm)", "power", "seeds for 80% power")
    rows = {row[0]: dict(zip(compact.columns, row, strict=True)) for row in compact.rows}
    # at the permutation floor the p-value and its Holm adjustment are bounds
    assert (rows["grows with n"]["p_value"], rows["grows with n"]["p (Holm)"]) == (
        "≤ 0.0001",
        "≤ 0.0003",
    )
    assert rows["saturates in d_h beyond n"]["p_value"] == "0.03"
    assert rows["saturates in d_h beyond n"]["seeds for 80% power"] == "∞"
    assert rows["linear in H"]["p_value"] == "—" and rows["grows with n"]["power"] == "—"
    # the full table: criteria, measured, what the power is taken at, the caveat
    assert "criterion" in full.columns and "caveat" in full.columns
    assert "p_floor" not in full.columns and "holds" not in full.columns


def test_notes_name_failures_with_their_caveat_and_inconclusive_with_power():
    notes = law_notes(_laws()) + multiplicity(_laws())
    assert notes[0] == (
        "Not reproduced in this run (the test fails): alike (aot_vs_mlp, d=10, p = 1) "
        "(caveat: trained 1/8 of the authors' budget)."
    )
    assert notes[1].endswith(
        "saturates in d_h beyond n (head_dim, shared, p = 0.03, power 0.17 at no gain: no seed "
        "count found for 80%)."
    )
    assert (
        notes[2].startswith("Untestable on this grid") and "linear in H (low_dim, aot)" in notes[2]
    )
    assert notes[3].startswith("Multiplicity: this table holds 3 tests;")
    assert "1 of the 2 p-values below 0.05 stay below it after the adjustment" in notes[3]
    # an undecided law losing significance under Holm is not named; a decided one is
    assert "decided below it but not after" not in notes[3]
    decided = _laws().replace({"outcome": {"inconclusive": "holds"}})
    assert (
        "decided below it but not after: saturates in d_h beyond n (head_dim, shared: holds, "
        "p (Holm) = 0.06)." in multiplicity(decided)[-1]
    )
