"""The protocol of paper A's sweeps: grids grow past capacity, warm starts keep what was
memorized, every series takes the convergence check, censored estimates never pass a law,
falls along T are counted."""

import copy
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from memcap.config_schema import validate_schema
from memcap.errors import ConfigError
from memcap.synthetic import laws
from memcap.synthetic.checks import check_synthetic_config
from memcap.synthetic.series import Series, Trained, between, bracket, check, climb, grows, next_T
from memcap.synthetic.settings import (
    Convergence,
    Ladder,
    StageSettings,
    sweep_spec,
)
from memcap.synthetic.summary import capacity_table, convergence_decision, largest_drop
from memcap.synthetic.sweep import run_sweep

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


def _fake_train(counts, log):
    """A ``train`` callable: memorized = counts(series key, T, budget); logs every replica."""

    def train(replicas, states):
        out = {}
        for r, state in zip(replicas, states, strict=True):
            log.append((r.setting.H, r.seed, r.T, r.restart, r.budget, state is not None))
            memorized = counts((r.setting, r.seed), r.T, r.budget, r.restart)
            out[r] = Trained({"memorized": memorized}, [], {"T": r.T}, r.restart)
        return out

    return train


def test_series_climb_until_their_count_stops_rising_or_max_t():
    spec, stage = _tiny({"grow_at": 0.9, "max_T": 32, "warm_start": True, "restarts": 0})
    everyone = [Series(s, seed) for s in spec.settings() for seed in stage.replicate_seeds(spec)]
    fits = (everyone[0].setting, everyone[0].seed)
    log = []
    train = _fake_train(lambda key, T, b, r: T if key == fits else min(T, 7), log)
    climb(everyone, spec.T, stage.ladder, train)
    rungs = [(T, sum(1 for entry in log if entry[2] == T)) for T in (4, 8, 16, 32)]
    # 7 of 8 is below grow_at but above 4 of 4: every series goes on until 16 memorizes no more
    assert rungs == [(4, len(everyone)), (8, len(everyone)), (16, len(everyone)), (32, 1)]
    assert [entry[5] for entry in log if entry[2] == 4] == [False] * len(everyone)  # no state yet
    assert all(entry[5] for entry in log if entry[2] > 4)  # warm: the previous rung's state
    assert everyone[0].T_tried == [4, 8, 16, 32] and everyone[1].T_tried == [4, 8, 16]
    assert everyone[0].capacity == 32 and everyone[1].capacity == 7


def test_without_past_maximum_only_the_fraction_grows_the_grid():
    spec, stage = _tiny({"grow_at": 0.9, "max_T": 32, "past_maximum": False})
    everyone = [Series(s, seed) for s in spec.settings() for seed in stage.replicate_seeds(spec)]
    climb(everyone, spec.T, stage.ladder, _fake_train(lambda key, T, b, r: min(T, 7), []))
    assert all(s.T_tried == [4, 8] for s in everyone)


def test_a_static_ladder_trains_the_listed_grid_in_one_pass():
    spec, stage = _tiny({"grow_at": None, "warm_start": False, "restarts": 0})
    everyone = [Series(s, seed) for s in spec.settings() for seed in stage.replicate_seeds(spec)]
    passes = []

    def train(replicas, states):
        passes.append(len(replicas))
        return {r: Trained({"memorized": r.T}, [], None, 0) for r in replicas}

    climb(everyone, spec.T, stage.ladder, train)
    assert passes == [len(everyone) * len(spec.T)]


def test_a_replica_that_fell_along_t_restarts_afresh_and_keeps_the_better_training():
    spec, stage = _tiny({"grow_at": None, "warm_start": False, "restarts": 2})
    one = Series(next(iter(spec.settings())), 0)
    log = []
    # at T = 8 the first two trainings memorize 3 (fell: 4 at T = 4), the third 7
    train = _fake_train(lambda key, T, b, r: T if T == 4 else (7 if r == 2 else 3), log)
    climb([one], spec.T, stage.ladder, train)
    assert [(entry[2], entry[3]) for entry in log] == [(4, 0), (8, 0), (8, 1), (8, 2)]
    assert one.recipe[8].memorized == 7 and one.recipe[8].restart == 2
    assert one.rows()[1]["restarts"] == 2


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


def _series(counts: dict[int, int], grow_at=None, past_maximum=False) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "sweep": "heads", "swept": "H", "value": 2, "H": 2, "n": 4, "d_h": 4,
                "context": "random", "task": "classification", "seed": 0, "bound": 7,
                "T": t, "memorized": m, "accuracy": m / t, "certified": 7,
                "certified_trained": 7, "grow_at": grow_at, "past_maximum": past_maximum,
            }
            for t, m in counts.items()
        ]
    )  # fmt: skip


def test_censored_at_the_ladder_level_and_the_largest_drop():
    assert capacity_table(_series({64: 64, 128: 120}, grow_at=0.9))["censored"].item()
    assert not capacity_table(_series({64: 64, 128: 110}, grow_at=0.9))["censored"].item()
    assert not capacity_table(_series({64: 64, 128: 120}))["censored"].item()  # grid: all of T
    assert capacity_table(_series({64: 64, 128: 128}))["censored"].item()
    # past the maximum: a count still rising at the largest T is not bracketed, a fall is
    rising = capacity_table(_series({64: 60, 128: 100}, 0.9, past_maximum=True))
    assert not rising["bracketed"].item() and not rising["censored"].item()
    fell = capacity_table(_series({64: 60, 128: 100, 256: 90}, 0.9, past_maximum=True))
    assert fell["bracketed"].item() and not fell["censored"].item()
    levelled = capacity_table(_series({64: 100, 128: 104}, 0.9, past_maximum=True))  # 4% up
    assert levelled["bracketed"].item() and not levelled["censored"].item()
    assert not capacity_table(_series({64: 100, 128: 104}, 0.9))["bracketed"].item()
    assert largest_drop(_series({64: 60, 128: 123, 256: 46})) == pytest.approx(
        1 - 46 / 123, abs=1e-4
    )
    assert largest_drop(_series({64: 60, 128: 70})) == 0.0
    # a fall at the largest T only (how the ladder past the maximum stops) is not inside
    top = capacity_table(_series({64: 60, 128: 123, 256: 46}, 0.9, past_maximum=True))
    assert top["largest_drop"].item() > 0.6 and top["drop_inside"].item() == 0.0
    inside = capacity_table(_series({64: 60, 128: 40, 256: 70, 512: 60}, 0.9, past_maximum=True))
    assert inside["drop_inside"].item() == pytest.approx(1 - 40 / 60, abs=1e-4)


def test_a_censored_seed_enters_the_law_as_a_lower_bound_and_is_counted():
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
    rows[3]["capacity"] = 60  # H = 4, seed 0: far below the line, and only a lower bound
    table = laws.law_table(pd.DataFrame(rows))
    assert table["outcome"].tolist() == ["holds"] and table["holds"].all()
    measured = table["measured"].item()
    assert "1 of 12 seeds are lower bounds (H = 4), taken as right-censored" in measured
    assert "(means ± SE of 3 seeds" in measured and "≥ 127.7" in measured
    rows[3]["censored"] = False  # the same count as a value pulls the mean off the line
    as_value = laws.law_table(pd.DataFrame(rows))
    assert as_value["p_value"].item() < 0.5 * table["p_value"].item()
    assert "lower bounds" not in as_value["measured"].item()


def test_every_seed_takes_the_longer_budget_and_the_setting_is_decided_on_all_of_them():
    spec, stage = _tiny({"grow_at": None, "restarts": 0})
    short = replace(stage, train={**stage.train, "steps": 10, "lr": 0.01})
    checked = run_sweep(spec, short, torch.device("cpu")).table
    assert {"convergence_gain", "convergence_margin", "budget"} <= set(checked.columns)
    # every series trained again with 4x the recipe's budget (10 steps), whatever it memorized
    longer = checked[checked["budget"] > 0]
    assert (longer["steps_run"] <= longer["budget"]).all() and set(longer["budget"]) <= {40}
    capacity = capacity_table(checked)
    assert capacity["convergence_gain"].notna().all()
    assert set(capacity["convergence"]) <= {"undetermined (one seed)"}  # configs/test: 1 seed
    off = replace(short, convergence=Convergence(0, 0.05))
    plain = run_sweep(spec, off, torch.device("cpu")).table
    assert (plain["budget"] == 0).all() and plain["convergence_gain"].isna().all()
    assert set(capacity_table(plain)["convergence"]) == {"not checked"}
    merged = plain.merge(checked, on=["H", "context", "T", "seed"], suffixes=("", "_checked"))
    assert (merged["memorized_checked"] >= merged["memorized"]).all()


def test_the_longer_budget_walks_up_the_ladder_from_a_fitted_capacity():
    """A capacity replica that fitted every example of its T says nothing about the budget:
    the check trains it again there and at every larger T while the series grows, each with
    four times the recipe's budget, from the capacity training's initialisation."""
    for past_maximum, walked in ((False, [8, 16, 32]), (True, [8, 16, 32, 64])):
        spec, stage = _tiny(
            {"grow_at": 0.9, "max_T": 128, "restarts": 0, "past_maximum": past_maximum}
        )
        one = Series(next(iter(spec.settings())), 0)
        one.recipe[8] = Trained({"memorized": 8}, [], None, restart=1)
        one.recipe[16] = Trained({"memorized": 7}, [], None, restart=0)
        log = []
        train = _fake_train(lambda key, T, b, r: T if T <= 16 else 20, log)  # 20 of 32 and 64
        check([one], stage.ladder, Convergence(4, 0.05), lambda T: 120, train)
        # 20 of 32 is below grow_at: the fraction's rule stops there; past the maximum, 32 is
        # the largest T tried and 20 rises over 16, so the check walks on until 64 brackets it
        assert [(e[2], e[3], e[4]) for e in log] == [(T, 1, 480) for T in walked]
        assert one.capacity == 20 and one.gain == (20 - 8) / 8
        assert [row["memorized"] for row in one.rows()] == [8, 16, 20, 20][: len(walked)]


def test_past_the_maximum_the_check_walks_on_only_from_the_largest_t_tried():
    """Below the largest T the recipe's ladder already went past the maximum: a longer
    budget's rise there takes no further T."""
    spec, stage = _tiny({"grow_at": 0.9, "max_T": 128, "restarts": 0, "past_maximum": True})
    one = Series(next(iter(spec.settings())), 0)
    for T, count in ((8, 8), (16, 9), (32, 9)):
        one.recipe[T] = Trained({"memorized": count}, [], None, restart=0)
    log = []
    train = _fake_train(lambda key, T, b, r: 12, log)  # 12 of 16 rises over 8, below grow_at
    check([one], stage.ladder, Convergence(2, 0.05), lambda T: 100, train)
    assert [e[2] for e in log] == [16]  # the capacity T; 32, tried, memorized fewer than 12
    assert one.capacity == 12 and one.T_tried == [8, 16, 32]


def test_the_convergence_decision_reads_the_paired_gains_interval_against_the_margin():
    assert convergence_decision([0.30, 0.25, 0.35, 0.28, 0.32], 0.05)["convergence"] == (
        "optimiser-limited"
    )
    assert convergence_decision([0.0, 0.01, -0.01, 0.0, 0.02], 0.05)["convergence"] == (
        "not limited"
    )
    noisy = convergence_decision([-0.40, 0.51, 0.05, 0.20, -0.10], 0.05)
    assert noisy["convergence"] == "undetermined" and not noisy["optimiser_limited"]
    assert noisy["gain_low"] < 0.05 < noisy["gain_high"]
    assert convergence_decision([float("nan")] * 3, 0.05)["convergence"] == "not checked"


def test_capacity_table_marks_unbracketed_maxima_and_the_exactly_fitted_t():
    rows = _series({32: 32, 64: 64, 128: 100})  # best at the largest T tried: "≥"
    table = capacity_table(rows)
    assert table["capacity_shown"].item() == "≥ 100" and not table["bracketed"].item()
    assert table["fitted_T"].item() == 64
    table = capacity_table(_series({32: 32, 64: 63, 128: 60}))
    assert table["capacity_shown"].item() == "63" and table["bracketed"].item()
    assert table["fitted_T"].item() == 32  # 63 of 64 is not fitted exactly


def test_max_t_below_the_grid_names_the_key():
    config = copy.deepcopy(_config())
    config["synthetic"]["ladder"].update(grow_at=0.9, max_T=8)
    with pytest.raises(ConfigError) as err:
        check_synthetic_config(config)
    assert err.value.key == "synthetic.ladder.max_T"


def test_ladder_rules():
    ladder = Ladder(grow_at=0.9, factor=2, max_T=256, warm_start=True, restarts=0)
    assert grows(ladder, 116, 128) and not grows(ladder, 115, 128)
    assert not grows(ladder, 256, 256)  # 2 T would pass max_T
    assert not grows(ladder, 100, 128, {64: 50, 128: 100})  # past_maximum off: the fraction
    rising = replace(ladder, past_maximum=True)
    assert grows(rising, 100, 128, {64: 99, 128: 105})  # more than 5% up
    assert not grows(rising, 100, 128, {64: 99, 128: 103})
    assert not grows(rising, 100, 128) and not grows(rising, 200, 256, {128: 10, 256: 200})
    assert next_T(ladder, 128) == 256 and next_T(replace(ladder, factor=1.01), 10) == 11
    assert ladder.data_size((64, 128)) == 256
    assert Ladder(None, 2, 256, False, 0).data_size((64, 128)) == 128


def test_past_the_maximum_the_rise_is_read_above_chance():
    """Chance grows with T: a count that rises only as chance does stops the ladder."""
    ladder = Ladder(0.9, 2, 4096, False, 0, past_maximum=True)
    one = Series(None, 0)
    for T, memorized, chance in ((512, 150, 20.0), (1024, 170, 35.0)):
        one.recipe[T] = Trained({"memorized": memorized, "chance": chance}, [], None, 0)
    assert not one.grows(ladder, 1024)  # 135 above chance against 130: under 5%
    one.recipe[1024].row["chance"] = 25.0
    assert one.grows(ladder, 1024)  # 145 against 130


def test_the_bracket_bisects_fitted_t_and_checks_every_unfitted_end():
    """A series that fits every T up to 45 and none above: bisection between the grid's T
    finds a fitted T and an unfitted one at most 1.1x apart, the unfitted end trained with
    the longer budget too; one that fits nothing halves down to one example."""
    spec, stage = _tiny({"grow_at": 0.9, "max_T": 64, "restarts": 0, "bracket": 1.1})
    assert stage.ladder.bracket == 1.1
    fits = {0: 45, 1: 0}  # seed -> the largest T it fits
    log = []
    counts = lambda key, T, budget, restart: T if fits[key[1]] >= T else T // 3  # noqa: E731
    train = _fake_train(counts, log)
    series = [Series(next(iter(spec.settings())), seed) for seed in (0, 1)]
    climb(series, (8, 16, 32), stage.ladder, train)
    check(series, stage.ladder, Convergence(2, 0.05), lambda T: 100, train)
    bracket(series, stage.ladder, Convergence(2, 0.05), lambda T: 100, train)
    low, high = series[0].fitted_bracket
    assert low == 45 and high in (46, 47, 48, 49) and high <= 1.1 * low
    assert all(s.fitted_bracket[1] in s.longer for s in series)  # unfitted by both budgets
    assert series[1].fitted_bracket == (0, 1)  # halved from 8 down to 1, none fitted
    table = capacity_table(pd.DataFrame(
        [row | {"sweep": "heads", "swept": "H", "value": 1, "H": 1, "n": 4, "d_h": 4,
                "context": "random", "task": "classification", "seed": s.seed, "bound": 4,
                "accuracy": row["memorized"] / T, "certified": 1, "certified_trained": 1,
                "T": T, "bracket": 1.1}
         for s in series for T, row in zip(s.T_tried, s.rows(), strict=True)]
    ))  # fmt: skip
    first = table[table["seed"] == 0].iloc[0]
    assert not first["fitted_censored"] and first["fitted_T_mid"] == pytest.approx(
        (45 * high) ** 0.5, abs=0.01
    )
    assert table[table["seed"] == 1].iloc[0]["fitted_T_mid"] == 0.0


def test_between_halves_then_bisects_geometrically_on_one_grid():
    assert between(0, 32, 1.1) == 16 and between(0, 1, 1.1) is None and between(0, 3, 1.1) == 2
    assert between(32, 64, 1.1) == 45 and between(45, 48, 1.1) is None  # 48 <= 1.1 * 45
    assert between(9, 10, 1.1) is None  # one example apart
    # the grid 2^(j/8) (each step 1.09 <= 1.1): overlapping brackets train the same T
    assert between(64, 128, 1.1) == 91 and between(91, 128, 1.1) == between(90, 128, 1.1) == 108
    assert between(100, 111, 1.1) == 108 and between(64, 91, 1.1) == 76
