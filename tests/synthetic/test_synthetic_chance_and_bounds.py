"""Chance and the bound column: a count a constant output reaches is shown as chance and kept
out of the laws; the bound is Theorem 1's H(n−1)+1 only where d_h ≥ n, the construction's
H(d_h−1)+1 below, labelled as that; the setup table sets this run beside paper A."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from memcap.config_schema import validate_schema
from memcap.synthetic.chance import chance_count
from memcap.synthetic.setup import PAPER_A, setup_sentence, setup_table
from memcap.synthetic.summary import capacity_table, estimate_table, fit_table
from memcap.theory import CONSTRUCTION, THEOREM, bound_kind, construction_count

ROOT = Path(__file__).resolve().parents[2]


def test_chance_is_the_expected_largest_class_count_of_uniform_labels():
    # 256 labels over 50 classes: 10.86 on the most frequent (the measured figure);
    # the Gaussian approximation T/C + sqrt(2 (T/C) ln C) is an upper estimate
    chance = chance_count(256, 50)
    assert chance.expected == pytest.approx(10.86, abs=0.15)
    assert chance.expected < 256 / 50 + np.sqrt(2 * 256 / 50 * np.log(50))
    assert chance.expected < chance.high <= 16
    # one class: every label is right; as many classes as labels: about ln T / ln ln T
    assert chance_count(40, 1) == (40.0, 40.0)
    assert chance_count(100, 100).expected < 6
    assert chance_count(512, 50).expected > chance.expected  # grows with T
    assert chance_count(256, 50) == chance  # fixed seed: reproducible


def test_regression_chance_is_the_most_targets_one_tolerance_window_holds():
    chance = chance_count(256, 0, 0.01)
    # at least the mean count 256 * 0.02 = 5.1 in a window of width 2 tol, plus the maximum's
    # excess; a constant output at c counts exactly the targets in [c - tol, c + tol]
    assert 256 * 0.02 < chance.expected < chance.high < 256 * 0.02 * 4
    rng = np.random.default_rng(3)
    y = np.sort(rng.random(256))
    best = max(int((np.abs(y - c) <= 0.01).sum()) for c in np.linspace(0, 1, 20001))
    from memcap.synthetic.chance import _window_count

    assert _window_count(y, 0.02) >= best >= _window_count(y, 0.02) - 1  # grid of constants
    assert chance_count(100, 0, 0.0) == (0.0, 0.0)  # exact regression: no chance count


def test_the_bound_is_theorem_1s_only_where_d_h_reaches_n():
    assert construction_count(4, 8, 8) == 29 and bound_kind(8, 8) == THEOREM
    assert construction_count(4, 8, 16) == 29 and bound_kind(8, 16) == THEOREM
    # d_h < n: the construction's H(d_h - 1) + 1, never the count at n
    assert [construction_count(4, 8, d) for d in (1, 2, 4)] == [1, 5, 13]
    assert bound_kind(8, 4) == CONSTRUCTION and "construction" in CONSTRUCTION


def _rows(counts: dict[int, int], seed: int = 0, value: int = 1, chance=True) -> list[dict]:
    rows = []
    for T, m in counts.items():
        c = chance_count(T, 50)
        rows.append(
            {
                "sweep": "context_size", "swept": "n", "value": value, "H": 2, "n": value,
                "d_h": 16, "context": "shared", "task": "classification", "seed": seed,
                "bound": construction_count(2, value, 16), "bound_kind": bound_kind(value, 16),
                "T": T, "memorized": m, "accuracy": m / T, "certified": 1,
                "certified_trained": 1, "grow_at": 0.9,
                **({"chance": c.expected, "chance_high": c.high} if chance else {}),
            }
        )  # fmt: skip
    return rows


def test_a_count_at_chance_is_shown_as_chance_and_left_out_of_the_fits():
    # n = 1 with a shared context: every example reads one token, 11-12 of 256 is chance
    rows = [r for seed in range(3) for r in _rows({128: 7 + seed, 256: 10 + seed}, seed)]
    rows += [r for seed in range(3) for r in _rows({128: 100, 256: 60 + seed}, seed, value=4)]
    table = capacity_table(pd.DataFrame(rows))
    low = table[table["value"] == 1]
    assert low["at_chance"].all() and (low["capacity_shown"].str.startswith("chance (")).all()
    assert (low["chance"] == chance_count(256, 50).expected).all()
    assert not table.loc[table["value"] == 4, "at_chance"].any()
    assert table.loc[table["value"] == 4, "capacity_shown"].tolist() == ["100"] * 3
    estimates = estimate_table(table)
    assert estimates.loc[estimates["value"] == 1, "capacity_shown"].item().startswith("chance")
    assert estimates["at_chance_seeds"].tolist() == [3, 0]
    fits = fit_table(table)
    assert (fits["left_out"] == "1").all() and (fits["points"] == 3).all()


def test_a_fitted_t_at_chance_reads_as_chance_in_the_estimates():
    # a constant output fits the first 3 nested labels: fitted_T = 3 (4 unfitted) is chance
    counts = {3: 3, 4: 3, 128: 7, 256: 10}
    rows = [{**r, "fitted_chance_high": 3.0} for s in range(3) for r in _rows(counts, s)]
    table = capacity_table(pd.DataFrame(rows))
    assert table["fitted_at_chance"].all() and not table["fitted_censored"].any()
    assert estimate_table(table)["fitted_T_shown"].item() == "chance (3.5 ± 0.0)"


def test_tables_written_before_chance_was_recorded_read_as_above_chance():
    table = capacity_table(pd.DataFrame(_rows({128: 7, 256: 10}, chance=False)))
    assert not table["at_chance"].item() and table["capacity_shown"].item() == "≥ 10"
    assert table["bound_kind"].item() == THEOREM


def test_the_fitted_t_bracket_is_the_largest_fitted_and_the_next_unfitted_t():
    table = capacity_table(pd.DataFrame(_rows({32: 32, 64: 64, 128: 100, 256: 90})))
    assert table[["fitted_T_low", "fitted_T_high"]].values.tolist() == [[64, 128]]
    none = capacity_table(pd.DataFrame(_rows({32: 20, 64: 30})))
    assert none["fitted_T_low"].item() == 0 and none["fitted_T_high"].item() == 32


def _config(path: str) -> dict:
    config = yaml.safe_load((ROOT / path).read_text())
    validate_schema(config, ROOT / "workflow/schemas/config.schema.yaml")
    return config


def test_the_setup_table_sets_this_run_beside_paper_a():
    section = _config("config.yaml")["synthetic"]
    table = setup_table(section).set_index("setting")
    assert list(table.index) == list(PAPER_A)
    assert table.loc["d (token dimension)"].tolist() == ["64", str(section["d"])]
    assert table.loc["classes", "this run"] == str(section["classes"])
    assert table.loc["batch", "this run"] == "full batch"  # batch_size: null
    assert f"{section['train']['steps']:,} steps" in table.loc["steps", "this run"]
    seeds = section["seeds"]  # the n sweep runs its own (4)
    assert table.loc["seeds per setting"].tolist() == [
        "1", f"H sweep: {seeds}; n sweep: 4; d_h sweep: {seeds}"
    ]  # fmt: skip
    assert "smaller sizes" in setup_sentence(section)
    notion = "capacity (the laws' notion)"
    assert table.loc[notion, "this run"].startswith("fitted_T, the largest T fitted exactly")
    assert f"bisected to {section['ladder']['bracket']:g}×" in table.loc[notion, "this run"]
    paper = _config("configs/paper.yaml")["synthetic"]
    table = setup_table(paper).set_index("setting")
    assert table.loc["batch", "this run"] == "batches of 256"
    assert table.loc[notion, "this run"].startswith("the most examples memorized")  # no bracket
    assert "300,000" in table.loc["steps", "this run"]
    assert "paper A's own recipe" in setup_sentence(paper)


def test_the_laws_leave_out_values_at_chance_and_name_them():
    from memcap.synthetic import laws

    rows = []
    for seed in range(4):
        for n, count in ((1, 11), (2, 57), (4, 75), (8, 92), (16, 108)):
            rows.append(
                {
                    "sweep": "context_size", "swept": "n", "value": n, "H": 2, "n": n,
                    "d_h": 16, "context": "shared", "task": "classification", "seed": seed,
                    "capacity": count + 3 * seed, "censored": False, "at_chance": n == 1,
                }
            )  # fmt: skip
    table = laws.law_table(pd.DataFrame(rows))
    assert table["outcome"].tolist() == ["holds"]
    assert "at chance, left out: n = 1" in table["measured"].item()


def test_the_figure_draws_chance_apart_and_labels_the_construction(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from memcap.synthetic.figures import _bound_label, plot_sweep

    rows = []
    for seed in range(3):
        for d_h in (1, 2, 4, 8, 12, 16):
            rows.append(
                {
                    "sweep": "head_dim", "swept": "d_h", "value": d_h, "H": 4, "n": 8,
                    "d_h": d_h, "context": "shared", "task": "classification", "seed": seed,
                    "capacity": 60 + 10 * min(d_h, 8) + seed, "censored": False,
                    "at_chance": False, "bound": construction_count(4, 8, d_h),
                    "bound_kind": bound_kind(8, d_h),
                }
            )  # fmt: skip
    frame = pd.DataFrame(rows)
    assert _bound_label(frame) == "H(min(n, d_h)−1)+1 (construction below n)"
    assert _bound_label(frame[frame["d_h"] >= 8]) == "H(n−1)+1"
    figure = plot_sweep(frame, "head_dim")
    labels = {t.get_text() for ax in figure.axes for t in ax.get_legend().get_texts()}
    assert "H(min(n, d_h)−1)+1 (construction below n)" in labels
    dashed = [line for line in figure.axes[0].get_lines() if line.get_linestyle() == "--"]
    assert [list(line.get_ydata()) for line in dashed] == [[1, 5, 13, 29]]  # d_h = 1, 2, 4, 8
    figure.savefig(tmp_path / "f.png")
