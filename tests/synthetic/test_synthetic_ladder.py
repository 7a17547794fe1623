"""The T ladder of paper A's sweeps: grids grow past capacity, warm starts keep what was
memorized, censored estimates never pass a law, falls along T are counted."""

import copy
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from memcap.config_schema import validate_schema
from memcap.errors import ConfigError
from memcap.synthetic import laws, sweep
from memcap.synthetic.checks import check_synthetic_config
from memcap.synthetic.ladder import passes
from memcap.synthetic.settings import (
    Convergence,
    Ladder,
    Replica,
    StageSettings,
    sweep_spec,
)
from memcap.synthetic.summary import capacity_table, largest_drop
from memcap.synthetic.sweep import Trained, run_sweep

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow/schemas/config.schema.yaml"


def _config() -> dict:
    config = yaml.safe_load((ROOT / "configs/test.yaml").read_text())
    validate_schema(config, SCHEMA)
    return config


def _tiny(ladder: dict, tasks=("classification",)) -> tuple:
    config = copy.deepcopy(_config())
    section, engine = config["synthetic"], config["engine"]
    section["ladder"].update(ladder)
    section["train"].update(steps=120, lr=0.05, eval_every=20, extra_budgets=0)
    section["sweeps"]["heads"].update(values=[1, 2], T=[4, 8], tasks=list(tasks))
    spec = sweep_spec(section, "heads")
    return spec, StageSettings.from_config(section, 0, engine)


def test_passes_grow_each_series_until_its_fraction_falls_or_max_t():
    spec, stage = _tiny({"grow_at": 0.9, "max_T": 32, "warm_start": True})
    series = [(s, seed) for s in spec.settings() for seed in stage.replicate_seeds(spec)]
    fits, stops = series[0], series[1]
    memorized = {}
    seen = []
    for members in passes(spec, stage, memorized):
        T = members[0].T
        seen.append((T, len(members)))
        for r in members:  # the first series fits everything, the second stops at 8
            key = (r.setting, r.seed)
            memorized[key, T] = T if key == fits else min(T, 7)
    assert seen[:2] == [(4, len(series)), (8, len(series))]  # the listed grid: every series
    assert seen[2:] == [(16, 1), (32, 1)]  # then only the one still at >= 90%, up to max_T
    assert stage.ladder.censored(memorized[fits, 32], 32)
    assert not stage.ladder.censored(memorized[stops, 8], 8)


def test_a_static_ladder_trains_the_listed_grid_in_one_pass():
    spec, stage = _tiny({"grow_at": None, "warm_start": False})
    assert len(list(passes(spec, stage, {}))) == 1


def test_warm_started_series_never_memorize_fewer_at_a_larger_t():
    spec, stage = _tiny({"grow_at": 0.9, "max_T": 64, "warm_start": True})
    # the convergence check trains afresh, so it may lift a smaller T above a warm larger one
    stage = replace(stage, convergence=Convergence(0, 0.05))
    table = run_sweep(spec, stage, torch.device("cpu")).table
    for _, series in table.groupby(["H", "context", "seed"]):
        series = series.sort_values("T")
        assert series["memorized"].is_monotonic_increasing, series[["T", "memorized"]]
        assert series["warm_start"].tolist() == [False] + [True] * (len(series) - 1)
        top = series.iloc[-1]
        assert top["T"] == 64 or top["memorized"] < 0.9 * top["T"]  # bracketed, or at max_T
    assert table["grown"].any()
    capacity = capacity_table(table)
    assert (capacity["largest_drop"] == 0).all()
    assert (capacity["censored"] == (capacity["T_max"] == 64) & capacity["censored"]).all()


def _series(counts: dict[int, int], grow_at=None) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "sweep": "heads", "swept": "H", "value": 2, "H": 2, "n": 4, "d_h": 4,
                "context": "random", "task": "classification", "seed": 0, "bound": 7,
                "T": t, "memorized": m, "accuracy": m / t, "certified": 7,
                "certified_trained": 7, "grow_at": grow_at,
            }
            for t, m in counts.items()
        ]
    )  # fmt: skip


def test_censored_at_the_ladder_level_and_the_largest_drop():
    assert capacity_table(_series({64: 64, 128: 120}, grow_at=0.9))["censored"].item()
    assert not capacity_table(_series({64: 64, 128: 110}, grow_at=0.9))["censored"].item()
    assert not capacity_table(_series({64: 64, 128: 120}))["censored"].item()  # grid: all of T
    assert capacity_table(_series({64: 64, 128: 128}))["censored"].item()
    assert largest_drop(_series({64: 60, 128: 123, 256: 46})) == pytest.approx(
        1 - 46 / 123, abs=1e-4
    )
    assert largest_drop(_series({64: 60, 128: 70})) == 0.0


def test_censored_settings_are_left_out_of_the_law_and_named():
    rows = []
    for seed in range(3):
        for h in (1, 2, 3, 4):
            rows.append(
                {
                    "sweep": "heads", "swept": "H", "value": h, "H": h, "n": 8, "d_h": 8,
                    "context": "random", "task": "classification", "seed": seed,
                    "capacity": 40 * h + seed, "censored": h == 4 and seed == 0,
                }
            )  # fmt: skip
    for row in rows[3::4]:  # H = 4: far above the line, and one seed's value a lower bound
        row["capacity"] += 200
    table = laws.law_table(pd.DataFrame(rows))
    assert table["outcome"].tolist() == ["holds"] and table["holds"].all()
    assert table["measured"].str.contains("censored, left out: H = 4").all()
    assert "(means ± SE of 3 seeds" in table["measured"].item()
    rows[3]["censored"] = False
    assert laws.law_table(pd.DataFrame(rows))["outcome"].tolist() == ["fails"]


def test_convergence_check_retrains_optimiser_limited_settings_with_the_longer_budget():
    spec, stage = _tiny({"grow_at": None, "restarts": 0})
    short = replace(stage, train={**stage.train, "steps": 10, "lr": 0.01})
    checked = run_sweep(spec, short, torch.device("cpu")).table
    assert {"convergence_gain", "optimiser_limited", "budget"} <= set(checked.columns)
    limited = checked[checked["optimiser_limited"]]
    assert (
        len(limited) and (checked["convergence_gain"] > 0.05).eq(checked["optimiser_limited"]).all()
    )
    # A limited setting's seeds train again with 4x the recipe's budget (10 steps), one
    # budget, whatever their first training ran (a fitted replica stops early).
    longer = checked[checked["budget"] > 0]
    assert len(longer) and (longer["steps_run"] <= longer["budget"]).all()
    assert set(longer["budget"]) == {40} and set(longer["H"]) <= set(limited["H"])
    capacity = capacity_table(checked)
    assert capacity["optimiser_limited"].any() and capacity["convergence_gain"].notna().all()
    off = replace(short, convergence=Convergence(0, 0.05))
    plain = run_sweep(spec, off, torch.device("cpu")).table
    assert (plain["budget"] == 0).all() and not plain["optimiser_limited"].any()
    merged = plain.merge(checked, on=["H", "context", "T", "seed"], suffixes=("", "_checked"))
    assert (merged["memorized_checked"] >= merged["memorized"]).all()


def test_the_longer_budget_walks_up_the_ladder_from_a_fitted_capacity(monkeypatch):
    """A capacity replica that fitted every example of its T says nothing about the budget:
    the check trains it again there and at every larger T while the series grows, each with
    four times the recipe's budget (never four times a budget already made longer)."""
    spec, stage = _tiny({"grow_at": 0.9, "max_T": 64, "restarts": 0})
    setting = next(iter(spec.settings()))
    trained = []

    def fake_pass(spec, stage, trainings, datasets, device, kept, warm):
        results = []
        for replica in trainings:
            trained.append((replica.T, replica.budget))
            memorized = replica.T if replica.T <= 16 else 20  # fits 8 and 16, 20 of 32
            result = Trained({"memorized": memorized}, [], None, replica.restart)
            kept[replace(replica, budget=0)] = result
            results.append((replica, result))
        return results

    monkeypatch.setattr(sweep, "_train_pass", fake_pass)
    start = Replica(setting, 0, 8)
    kept = {start: Trained({"memorized": 8}, [], None, 0)}
    most = sweep._walk_longer(spec, stage, [start], {}, None, kept, {})
    assert trained == [(8, 480), (16, 480), (32, 480)]  # 4 x 120 steps at every T
    assert most == {(setting, 0): 20}


def test_max_t_below_the_grid_names_the_key():
    config = copy.deepcopy(_config())
    config["synthetic"]["ladder"].update(grow_at=0.9, max_T=8)
    with pytest.raises(ConfigError) as err:
        check_synthetic_config(config)
    assert err.value.key == "synthetic.ladder.max_T"


def test_ladder_rules():
    ladder = Ladder(grow_at=0.9, factor=2, max_T=256, warm_start=True, restarts=0)
    assert ladder.grows(116, 128) and not ladder.grows(115, 128)
    assert not ladder.grows(256, 256)  # 2 T would pass max_T
    assert ladder.data_size((64, 128)) == 256
    assert Ladder(None, 2, 256, False, 0).data_size((64, 128)) == 128
