"""The depth table (depth.csv) from per-layer records, its criterion and the report's span."""

from __future__ import annotations

import pandas as pd
import pytest

from memcap.assumptions import depth, figures
from memcap.assumptions.summary import summary_row
from memcap.report.depth import theorem_gaps, theorem_span
from memcap.report.loaders import evidence_from_summary
from memcap.report.verdicts import Verdict, layer_verdicts


def _kruskal(p_n: float = 1.0, samples: int = 100, upper: int | None = None) -> dict:
    return {
        "T": 200,
        "d": 32,
        "n": 16,
        "samples": samples,
        "rtol": None,
        "route": "gram",
        "p_n": p_n,
        "p_d": 0.5,
        "estimate": 20 if p_n == 1.0 else 12,
        "upper_bound": upper,
        "lower_bound": 2,
        "spectral_cap": 32,
        "seconds": 0.1,
        "pairs": {
            "zero_rows": 0,
            "duplicate_pairs": 0,
            "dependent_pairs": 0,
            "near_duplicate_pairs": 0,
        },
        "certificates": [],
        "dependent_bound_n": 1 - 0.05 ** (1 / samples),
    }


def _context(full: float = 1.0) -> dict:
    return {
        "contexts_checked": 200,
        "n": 16,
        "d": 32,
        "rtol": None,
        "full_rank_frac": full,
        "rank_min": 16 if full == 1.0 else 15,
        "worst_margin": 3.0,
        "svd_checked": 4,
    }


ROWS = {
    "random_attention": ("detail", _context(), _kruskal(samples=500)),
    "2": ("depth", _context(), _kruskal()),
    "0": ("detail", _context(0.5), _kruskal(samples=500)),
    "10": ("depth", _context(), _kruskal(p_n=0.9)),
    "1": ("detail", _context(), _kruskal(samples=500)),
    "3": ("depth", _context(), _kruskal(samples=10)),  # too few orderings to pass
}


def _table() -> pd.DataFrame:
    return depth.depth_table(
        [depth.depth_row("m", layer, role, c, k) for layer, (role, c, k) in ROWS.items()]
    )


def test_depth_table_orders_layers_with_random_attention_last():
    table = _table()
    assert list(table.columns[: len(depth.DEPTH_COLUMNS)]) == list(depth.DEPTH_COLUMNS)
    assert list(table["layer"]) == ["0", "1", "2", "3", "10", "random_attention"]
    assert list(table["role"]) == ["detail", "detail", "depth", "depth", "depth", "detail"]
    row = table.set_index("layer").loc["2"]
    assert row["samples"] == 100 and row["p_n"] == 1.0 and row["kruskal_estimate"] == 20
    assert row["dependent_bound"] == pytest.approx(0.0295, abs=1e-4)  # 1 - 0.05^(1/100)
    assert pd.isna(row["kruskal_upper"]) and row["kruskal_lower"] == 2


def test_theorem1_applies_is_the_report_verdict():
    table = _table().set_index("layer")
    for layer, (_, context, kruskal) in ROWS.items():
        (evidence,) = evidence_from_summary(
            pd.DataFrame([summary_row("m", layer, context, kruskal)])
        )
        expected = layer_verdicts(evidence).theorem.verdict is Verdict.PASS
        assert bool(table.loc[layer, "theorem1_applies"]) is expected, layer
    assert list(table["theorem1_applies"]) == [False, True, True, False, False, True]


def test_summary_rows_keep_the_summary_columns_and_the_role():
    rows = depth.summary_rows(_table())
    assert len(rows) == len(ROWS)
    assert {"model", "layer", "role", "kruskal_p_n", "context_full_rank_frac"} <= set(rows[0])
    assert not set(rows[0]) & {"p_n", "theorem1_applies", "kruskal_lower"}


def test_profiles_table_prepends_the_layer():
    profile = pd.DataFrame({"k": [1, 2], "p_full_rank": [1.0, 0.5]})
    table = depth.profiles_table({"2": profile, "3": profile})
    assert list(table.columns[:3]) == ["layer", "k", "p_full_rank"]
    assert list(table["layer"]) == ["2", "2", "3", "3"]
    assert list(depth.profiles_table({}).columns) == ["layer", "k", "p_full_rank"]


@pytest.mark.parametrize(
    ("applies", "expected"),
    [
        ({"0": False, "1": True, "2": True, "3": True}, ("1", "—")),  # holds to the deepest
        ({"0": True, "1": True, "2": False, "3": False}, ("0", "1")),  # stops at block 2
        ({"0": False, "1": False}, ("never", "—")),
        ({"0": True, "1": False, "2": True, "random_attention": False}, ("0", "—")),
    ],
)
def test_theorem_span(applies, expected):
    table = pd.DataFrame({"layer": list(applies), "theorem1_applies": list(applies.values())})
    assert theorem_span(table) == expected
    assert theorem_span(pd.read_csv(_roundtrip(table), dtype={"layer": str})) == expected


def test_theorem_gaps_name_later_layers_with_their_verdicts():
    verdicts = {
        "0": "fail",
        "1": "pass",
        "2": "inconclusive",
        "3": "inconclusive",
        "4": "fail",
        "5": "pass",
        "random_attention": "fail",
    }
    table = pd.DataFrame(
        {
            "layer": list(verdicts),
            "theorem1_applies": [v == "pass" for v in verdicts.values()],
            "theorem1": list(verdicts.values()),
        }
    )
    assert theorem_gaps(table) == "2, 3 (inconclusive); 4 (fail)"
    assert theorem_gaps(table.drop(columns="theorem1")) == "2, 3, 4 (fail)"
    assert theorem_gaps(table[table["layer"].isin(["0", "1"])]) == "—"
    assert theorem_gaps(table.assign(theorem1_applies=False)) == "—"


def _roundtrip(table: pd.DataFrame):
    from io import StringIO

    return StringIO(table.to_csv(index=False))


def test_depth_figure_has_two_panels():
    figure = figures.plot_depth(_table(), "m · depth profile")
    assert len(figure.axes) == 2
