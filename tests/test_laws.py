"""Both papers' laws checked on result tables: each criterion holds and fails where it should."""

from __future__ import annotations

import pandas as pd
import pytest

from memcap.aot import laws as aot_laws
from memcap.synthetic import laws as synthetic_laws


def _capacity(sweep: str, values: list[int], per_seed: list[list[float]], n: int = 8) -> list:
    """Capacity rows of one sweep: ``per_seed[k][i]`` is seed k's capacity at ``values[i]``."""
    swept = {"heads": "H", "context_size": "n", "head_dim": "d_h"}[sweep]
    rows = []
    for seed, capacities in enumerate(per_seed):
        for value, capacity in zip(values, capacities, strict=True):
            shape = {"H": 4, "n": n, "d_h": 8, swept: value}
            rows.append(
                {
                    "sweep": sweep,
                    "swept": swept,
                    "value": value,
                    **shape,
                    "context": "shared",
                    "task": "classification",
                    "seed": seed,
                    "capacity": capacity,
                    "certified": capacity,
                    "certified_trained": capacity,
                }
            )
    return rows


def _synthetic(*sweeps: list) -> pd.DataFrame:
    return synthetic_laws.law_table(pd.DataFrame([row for rows in sweeps for row in rows]))


def test_paper_a_laws_hold_on_curves_that_follow_theorem_1():
    laws = _synthetic(
        _capacity("heads", [1, 2, 3, 4], [[30, 61, 90, 121], [32, 59, 92, 119]]),
        _capacity("context_size", [2, 4, 8], [[20, 40, 70], [22, 38, 74]]),
        _capacity("head_dim", [2, 4, 8, 16], [[50, 90, 150, 145], [54, 86, 154, 160]]),
    )
    assert list(laws.columns) == synthetic_laws.COLUMNS
    assert list(laws["law"]) == [
        "grows with n",
        "grows with d_h up to n",
        "flat in d_h beyond n",
        "linear in H",
    ]
    assert laws["holds"].all()
    # The best seed is the estimate; the mean and spread are given beside it.
    assert (
        "154 (mean 152.0 ± 2.8) at d_h = 8; 160 (mean 152.5 ± 10.6) (+4%) at 16"
        in (laws["measured"].iloc[2])
    )
    # One seed stuck in a poor optimum (96) does not fail the law: the best seed is the estimate.
    stuck = _synthetic(_capacity("head_dim", [4, 8, 16], [[150, 160, 96], [140, 150, 158]]))
    assert stuck.set_index("law").loc["flat in d_h beyond n", "holds"]
    # A rise beyond n is reported, not failed: Theorem 1 only guarantees up to d_h = n.
    rise = _synthetic(_capacity("head_dim", [2, 4, 8, 16], [[50, 90, 150, 180]]))
    assert rise["holds"].all() and "(+20%) at 16" in rise["measured"].iloc[1]


@pytest.mark.parametrize(
    ("sweep", "values", "per_seed", "law"),
    [
        ("heads", [1, 2, 3, 4], [[30, 120, 40, 125]], "linear in H"),
        # One seed's failure does not fail a law, two seeds both falling short do.
        ("context_size", [2, 4, 8], [[40, 30, 70], [20, 34, 60]], "grows with n"),
        ("context_size", [2, 4, 8], [[40, 30, 70]], "grows with n"),  # a 25% fall
        ("context_size", [2, 4, 8], [[40, 40, 39]], "grows with n"),  # last not above first
        ("head_dim", [2, 4, 8, 16], [[50, 90, 150, 130]], "flat in d_h beyond n"),  # -13%
    ],
)
def test_paper_a_law_fails_beyond_its_tolerance(sweep, values, per_seed, law):
    laws = _synthetic(_capacity(sweep, values, per_seed))
    assert not laws.loc[laws["law"] == law, "holds"].item()


def _aot_summary(accuracies: dict[int, float], bound: float = 0.05) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "sweep": "heads",
                "task": "association",
                "model": "aot",
                "N": 50,
                "S": 2,
                "d": 10,
                "d_h": 10,
                "H": h,
                "seed": seed,
                "accuracy": acc + (0.01 if seed else -0.01),
                "chance": 0.02,
                "bound_ours": bound,
                "bound_previous": bound,
                "x_axis": "H",
                "facet": "",
            }
            for h, acc in accuracies.items()
            for seed in (0, 1)
        ]
    )


def test_paper_b_heads_curve_against_the_published_accuracies():
    published = aot_laws.published()
    points = published["curves"][0]["points"]
    near = _aot_summary({h: points[h] + 0.05 for h in (1, 11, 21)})
    laws = aot_laws.law_table(near)
    row = laws[laws["law"] == "matches the authors' published accuracies"].iloc[0]
    assert row["holds"] and "H = 11: 0.556 vs 0.506" in row["measured"]
    assert laws.set_index("law").loc["above paper B's lower bound", "holds"]
    assert laws.set_index("law").loc["linear in H", "holds"]
    far = _aot_summary({1: points[1], 11: points[11] - 0.15})
    laws = aot_laws.law_table(far)
    assert not laws.set_index("law").loc["matches the authors' published accuracies", "holds"]


def test_paper_b_bound_and_unmatched_settings():
    below = _aot_summary({1: 0.03, 6: 0.04}, bound=0.2)
    below["N"] = 70  # no published curve at N = 70: no comparison row
    laws = aot_laws.law_table(below)
    assert "matches the authors' published accuracies" not in set(laws["law"])
    assert not laws.set_index("law").loc["above paper B's lower bound", "holds"]


def test_paper_b_aot_against_the_mlp_transformer_at_equal_parameter_counts():
    rows = []
    for model, accuracies in (("aot", [0.07, 0.11, 0.15]), ("mlp", [0.06, 0.10, 0.22])):
        for k, acc in enumerate(accuracies):
            rows.append(
                {**_aot_summary({1: acc}).iloc[0].to_dict(), "sweep": "aot_vs_mlp",
                 "model": model, "N": 70, "d": 7, "d_h": 7, "H": 1 + 5 * k,
                 "params": 1288 + 1100 * k + (0 if model == "aot" else -60 * k),
                 "accuracy": acc, "x_axis": "params", "facet": "d"}
            )  # fmt: skip
    summary = pd.DataFrame(rows)
    laws = aot_laws.law_table(summary).set_index("law")
    row = laws.loc["AoT and MLP-Transformer alike per parameter"]
    assert row["curve"] == "d=7" and not row["holds"]
    assert "3488 / 3368 parameters: 0.150 vs 0.220; largest |Δ| 0.070" in row["measured"]
    summary.loc[summary["accuracy"] == 0.22, "accuracy"] = 0.17
    laws = aot_laws.law_table(summary).set_index("law")
    assert laws.loc["AoT and MLP-Transformer alike per parameter", "holds"]


def test_paper_b_forms_are_checked_below_saturation_with_enough_points():
    bent = _aot_summary({1: 0.1, 11: 0.5, 21: 0.6, 31: 0.99})  # 0.99 is saturated: left out
    row = aot_laws.law_table(bent).set_index("law").loc["linear in H"]
    assert not row["holds"] and "over 3 points" in row["measured"]
    short = _aot_summary({1: 0.1, 11: 0.5, 21: 0.97})  # two points below saturation: untested
    assert "linear in H" not in set(aot_laws.law_table(short)["law"])
