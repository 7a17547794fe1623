"""The depth table (depth.csv) from per-layer records, its criterion and the report's span."""

from __future__ import annotations

import pandas as pd
import pytest

from memcap.assumptions import depth, figures
from memcap.assumptions.evidence import evidence_from_row
from memcap.assumptions.summary import summary_row
from memcap.assumptions.verdicts import MIN_SUBSETS, layer_verdicts
from memcap.numerics import Outcome
from memcap.report.depth import theorem_gaps, theorem_span

APPLIES, FAILS, CLOSE = (
    o.value for o in (Outcome.APPLIES, Outcome.DOES_NOT_APPLY, Outcome.TOO_CLOSE)
)


def _kruskal(p_n: float = 1.0, samples: int = 100, upper: int | None = None) -> dict:
    """A Kruskal record as the stage writes it; its outcome at n follows the band's rule:
    P(n) < 1 even a decade below the tolerance does not apply, fewer than MIN_SUBSETS
    orderings cannot apply."""
    outcome_n = FAILS if p_n < 1.0 else APPLIES if samples >= MIN_SUBSETS else CLOSE
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
        "scaling": "equilibrate",
        "outcome_n": outcome_n,
        "outcome_d": FAILS,  # P(d) = 0.5
        "band": {"p_n_strict": p_n, "p_n_loose": p_n, "p_d_strict": 0.5, "p_d_loose": 0.5},
        "paper_a": {"scaling": "none", "p_n": p_n, "p_d": 0.5, "estimate": 12},
    }


def _context(full: float = 1.0) -> dict:
    """A context record as the stage writes it: with rank-deficient contexts, does not apply."""
    deficient = round(200 * (1 - full))
    return {
        "contexts_checked": 200,
        "n": 16,
        "d": 32,
        "rtol": None,
        "scaling": "equilibrate",
        "full_rank_frac": full,
        "rank_min": 16 if full == 1.0 else 15,
        "worst_margin": 3.0 if full == 1.0 else None,
        "median_margin": 4.0,
        "svd_checked": 4,
        "outcome": APPLIES if full == 1.0 else FAILS,
        "outcome_counts": {APPLIES: 200 - deficient} | ({FAILS: deficient} if deficient else {}),
        "proved_deficient": deficient,
        "paper_a": {"full_rank_frac": full, "worst_margin": 2.0},
    }


ROWS = {
    "random_attention": ("detail", _context(), _kruskal(samples=500)),
    "2": ("depth", _context(), _kruskal()),
    "0": ("detail", _context(0.5), _kruskal(samples=500)),
    "10": ("depth", _context(), _kruskal(p_n=0.9)),
    "1": ("detail", _context(), _kruskal(samples=500)),
    "3": ("depth", _context(), _kruskal(samples=10)),  # too few orderings to apply
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


def test_theorem1_applies_is_the_stage_outcome():
    table = _table().set_index("layer")
    for layer, (_, context, kruskal) in ROWS.items():
        evidence = evidence_from_row(summary_row("m", layer, context, kruskal))
        outcome = layer_verdicts(evidence).theorem.outcome
        assert table.loc[layer, "theorem1"] == outcome.value, layer
        assert bool(table.loc[layer, "theorem1_applies"]) is (outcome is Outcome.APPLIES), layer
    assert list(table["theorem1_applies"]) == [False, True, True, False, False, True]
    assert list(table["theorem1"]) == [FAILS, APPLIES, APPLIES, CLOSE, FAILS, APPLIES]
    # the stage's words for each check travel with the row
    assert table.loc["3", "kruskal_outcome"] == CLOSE
    assert "too few to say" in table.loc["3", "kruskal_reason"]
    assert table.loc["0", "context_outcome"] == FAILS


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


def test_theorem_gaps_name_later_layers_with_their_outcomes():
    outcomes = {
        "0": FAILS,
        "1": APPLIES,
        "2": CLOSE,
        "3": CLOSE,
        "4": FAILS,
        "5": APPLIES,
        "random_attention": FAILS,
    }
    table = pd.DataFrame(
        {
            "layer": list(outcomes),
            "theorem1_applies": [v == APPLIES for v in outcomes.values()],
            "theorem1": list(outcomes.values()),
        }
    )
    assert theorem_gaps(table) == "2, 3 (too close to call); 4 (does not apply)"
    assert theorem_gaps(table.drop(columns="theorem1")) == "2, 3, 4 (does not apply)"
    assert theorem_gaps(table[table["layer"].isin(["0", "1"])]) == "—"
    assert theorem_gaps(table.assign(theorem1_applies=False)) == "—"


def _roundtrip(table: pd.DataFrame):
    from io import StringIO

    return StringIO(table.to_csv(index=False))


def test_depth_figure_has_two_panels():
    figure = figures.plot_depth(_table(), "m · depth profile")
    assert len(figure.axes) == 2
