"""The report's real-memorization section: each input side by side, and the first screen's
"achieved" words with their lower bounds and chance marked."""

import pandas as pd

from memcap.real_memorization import summary
from memcap.report.real_memorization import achieved, controls, side_by_side


def _estimates() -> pd.DataFrame:
    rows = []
    for kind, counts, shown in (
        ("real", [9, 20, 40], ["chance (9.0 ± 1.0)", "20.0 ± 2.0", "≥ 40.0 ± 3.0"]),
        ("gaussian", [50, 100, 200], ["50.0 ± 1.0", "100.0 ± 2.0", "≥ 200.0 ± 3.0"]),
    ):
        for H, count, text in zip((1, 2, 4), counts, shown, strict=True):
            rows.append({
                "model": "m", "layer": 1, "input": kind, "context": "shared",
                "task": "classification", "H": H, "n": 8, "bound": 7 * H + 1, "seeds": 3,
                "capacity_mean": float(count), "capacity_shown": text,
            })  # fmt: skip
    return pd.DataFrame(rows)


def test_achieved_reads_the_real_counts_with_bounds_and_chance_marked():
    words = achieved(_estimates(), "m")
    assert words.startswith("layer 1: 9 (chance) / 20 / ≥ 40 at H = 1 / 2 / 4")
    assert "Theorem 1: 8 / 15 / 29" in words
    assert "gaussian 50 / 100 / ≥ 200" in words  # a control's lower bound marked too
    assert "seed means of 3" in words and "shared context" in words


def test_the_section_names_only_the_controls_the_run_trained():
    assert controls(_estimates()) == "Gaussian with the real tokens' mean and covariance"
    both = pd.concat([_estimates(), _estimates().assign(input="uniform")])
    assert controls(both).startswith("uniform on [0, 1]") and "and Gaussian" in controls(both)
    assert controls(_estimates().query("input == 'real'")) == ""


def test_side_by_side_puts_every_input_in_its_own_column():
    table = side_by_side(_estimates())
    assert list(table.columns) == [
        "model",
        "layer",
        "context",
        "task",
        "H",
        "H(n'−1)+1",
        "gaussian",
        "real",
    ]
    assert table.loc[table["H"] == 4, "real"].item() == "≥ 40.0 ± 3.0"


def test_the_stage_tables_hold_one_row_per_setting():
    capacity = pd.DataFrame([
        {"model": "m", "layer": "1", "input": kind, "sweep": "heads", "swept": "H",
         "value": H, "H": H, "n": 4, "d_h": 4, "context": "shared", "task": "classification",
         "seed": seed, "bound": 3 * H + 1, "capacity": 10 * H + seed + (5 if kind == "real" else 0),
         "capacity_shown": "x", "bracketed": True, "censored": False, "fitted_T": 8,
         "convergence": "not limited", "gain_mean": 0.0, "gain_low": 0.0, "gain_high": 0.0,
         "optimiser_limited": False, "at_chance": False}
        for kind in ("real", "uniform") for H in (1, 2, 4) for seed in range(3)
    ])  # fmt: skip
    estimates = summary.estimates(capacity)
    assert len(estimates) == 6 and set(estimates["input"]) == {"real", "uniform"}
    paired = summary.paired(capacity)
    assert len(paired) == 3 and set(paired["control"]) == {"uniform"}
