"""Synthetic sweeps: config checks, orchestration, capacity estimates and fits."""

import copy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from snakemake.utils import validate

from memcap.errors import ConfigError
from memcap.synthetic.bounds import linear_fit
from memcap.synthetic.checks import check_synthetic_config
from memcap.synthetic.settings import StageSettings, sweep_memory_mb, sweep_names, sweep_spec
from memcap.synthetic.summary import bound_ratios, capacity_table, fit_table, saturation_table
from memcap.synthetic.sweep import run_sweep
from memcap.theory import theory_bound
from memcap.training.data import ReplicaData

ROOT = Path(__file__).resolve().parents[2]


def _config(name: str = "configs/test.yaml") -> dict:
    config = yaml.safe_load((ROOT / name).read_text())
    validate(config, str(ROOT / "workflow/schemas/config.schema.yaml"))
    return config


@pytest.mark.parametrize("name", ["config.yaml", "configs/test.yaml", "configs/paper.yaml"])
def test_shipped_configs_pass(name):
    config = _config(name)
    check_synthetic_config(config)
    assert sweep_names(config["synthetic"]) == ["heads", "context_size", "head_dim"]


@pytest.mark.parametrize(
    ("path", "value", "key", "message"),
    [
        (("sweeps", "heads", "values"), [], "synthetic.sweeps.heads.values", "empty"),
        (("sweeps", "head_dim", "values"), [0, 2], "synthetic.sweeps.head_dim.values", "below 1"),
        (("sweeps", "heads", "T"), [16, 8], "synthetic.sweeps.heads.T", "increasing"),
        (("sweeps", "heads", "T"), [8, 8], "synthetic.sweeps.heads.T", "repeats"),
        (
            ("sweeps", "context_size", "values"),
            [2, 9],
            "synthetic.sweeps.context_size.values",
            "d=6",
        ),
        (("sweeps", "head_dim", "n"), 7, "synthetic.sweeps.head_dim.n", "exceeds d"),
        (("sweeps", "heads", "contexts"), [], "synthetic.sweeps.heads.contexts", "non-empty"),
        (("saturation_threshold",), 0.3, "synthetic.saturation_threshold", "one-hot"),
    ],
)
def test_bad_sweep_config_names_the_key(path, value, key, message):
    config = _config()
    section = config["synthetic"]
    for part in path[:-1]:
        section = section[part]
    section[path[-1]] = value
    with pytest.raises(ConfigError, match=message) as err:
        check_synthetic_config(config)
    assert err.value.key == key


def test_all_sweeps_disabled_is_an_error_unless_the_stage_is_off():
    config = _config()
    for sweep in config["synthetic"]["sweeps"].values():
        sweep["enabled"] = False
    with pytest.raises(ConfigError, match="every sweep is disabled"):
        check_synthetic_config(config)
    config["synthetic"]["enabled"] = False
    check_synthetic_config(config)


def test_memory_request_grows_with_the_largest_batched_model():
    config = _config("config.yaml")
    section, engine = config["synthetic"], config["engine"]
    per_t = sweep_memory_mb(section, engine, "heads", base_mb=0)
    engine["synthetic"]["group_by"] = []  # every T of the grid in one model, padded to the largest
    everything = sweep_memory_mb(section, engine, "heads", base_mb=0)
    section["sweeps"]["heads"]["T"] = [32, 64, 128, 2048]
    larger_t = sweep_memory_mb(section, engine, "heads", base_mb=0)
    section["seeds"] *= 2
    assert 0 < per_t < everything < larger_t < sweep_memory_mb(section, engine, "heads", base_mb=0)


def test_a_sweeps_own_train_block_overrides_the_stages():
    config = _config()
    section = config["synthetic"]
    # context_size uses our recipe in configs/test.yaml (head_dim uses the authors', whose step
    # count also depends on T).
    section["sweeps"]["context_size"]["train"] = {"steps": 7}
    stage = StageSettings.from_config(section, 3, config["engine"])
    sweeps = ("context_size", "heads")
    own, default = (stage.train_config(sweep_spec(section, n), 64) for n in sweeps)
    assert (own.steps, default.steps) == (7, section["train"]["steps"])
    assert own.lr == default.lr == section["train"]["lr"]
    assert stage.replicate_seeds(sweep_spec(section, "heads")) == [
        3000 + k for k in range(section["seeds"])
    ]


def test_a_sweeps_own_seeds_extend_the_stages_replicates():
    config = _config()
    section, engine = config["synthetic"], config["engine"]
    section["sweeps"]["context_size"]["seeds"] = section["seeds"] + 2
    stage = StageSettings.from_config(section, 3, engine)
    own, default = (
        stage.replicate_seeds(sweep_spec(section, n)) for n in ("context_size", "heads")
    )
    assert len(own) == section["seeds"] + 2 and own[: len(default)] == default
    more = sweep_memory_mb(section, engine, "context_size", base_mb=0)
    section["sweeps"]["context_size"]["seeds"] = None
    assert sweep_memory_mb(section, engine, "context_size", base_mb=0) < more


def test_theory_bound_is_h_times_n_minus_one_plus_one():
    assert [theory_bound(h, 5) for h in (1, 2, 3)] == [5, 9, 13]


def _tiny_section(group_by: list[str]) -> tuple[dict, dict]:
    """A tiny heads sweep's synthetic section and the engine section grouping it by ``group_by``."""
    config = copy.deepcopy(_config())
    section, engine = config["synthetic"], config["engine"]
    engine["synthetic"]["group_by"] = group_by
    section["train"].update(steps=150, lr=0.05, eval_every=25)
    section["sweeps"]["heads"].update(values=[1, 2], T=[4, 24])
    section["ladder"].update(grow_at=None, restarts=0)  # the listed grid, one training each
    section["convergence"]["factor"] = None  # one training per replica (checked apart)
    return section, engine


def test_sweep_rows_cover_both_tasks_and_contexts():
    section, engine = _tiny_section(["T"])
    spec = sweep_spec(section, "heads")
    result = run_sweep(spec, StageSettings.from_config(section, 0, engine), torch.device("cpu"))
    table = result.table
    assert len(table) == 2 * 2 * 2 * 2  # H values × contexts × tasks × T grid (one seed)
    assert set(table["task"]) == {"classification", "regression"}
    assert set(table["context"]) == {"shared", "random"}
    assert (table["memorized"] <= table["T"]).all()
    np.testing.assert_allclose(table["accuracy"], table["memorized"] / table["T"])
    assert (table["certified"] <= table["T"]).all()
    shared = table[table["context"] == "shared"]
    assert (shared["certified"] <= shared["bound"]).all()
    assert (shared["certified_trained"] <= shared["bound"]).all()
    # Four examples are easy: classification memorizes them all.
    easy = table[(table["T"] == 4) & (table["task"] == "classification")]
    assert (easy["memorized"] == 4).all()
    assert set(result.saturation["head"]) == {0, 1}
    assert result.saturation["saturation"].between(0, 1).all()


def test_grouping_does_not_change_results():
    tables = []
    for group_by in ([], ["shape", "T"]):
        section, engine = _tiny_section(group_by)
        section["sweeps"]["heads"]["tasks"] = ["classification"]
        # Early stop ends a group once all of it fits; a gentle lr keeps float rounding
        # (different batch shapes reduce in different orders) from being amplified.
        section["train"].update(early_stop=False, lr=0.01, steps=100)
        spec = sweep_spec(section, "heads")
        result = run_sweep(spec, StageSettings.from_config(section, 0, engine), torch.device("cpu"))
        tables.append(result.table.sort_values(["H", "context", "T"]).reset_index(drop=True))
    masked, grouped = tables
    pd.testing.assert_series_equal(masked["memorized"], grouped["memorized"])
    pd.testing.assert_series_equal(masked["certified"], grouped["certified"])
    np.testing.assert_allclose(masked["loss"], grouped["loss"], rtol=1e-3, atol=1e-5)


def test_extra_budgets_extend_only_replicas_still_learning_in_a_sweep():
    tables = {}
    for rounds in (0, 2):
        section, engine = _tiny_section(["T"])
        section["sweeps"]["heads"]["tasks"] = ["classification"]
        section["train"].update(schedule="constant", steps=60, extra_budgets=rounds)
        spec = sweep_spec(section, "heads")
        result = run_sweep(spec, StageSettings.from_config(section, 0, engine), torch.device("cpu"))
        tables[rounds] = result.table
    once, more = tables[0], tables[2]
    extended = more["steps_run"] > more["steps"]
    assert extended.any() and not extended.all()
    assert (once["steps_run"] <= once["steps"]).all()
    # Extended: unfitted with the loss still falling after one budget; the rest unchanged.
    assert (once.loc[extended, "accuracy"] < 1).all()
    assert (once.loc[extended, "late_loss_drop"] > 0.05).all()
    pd.testing.assert_frame_equal(once[~extended], more[~extended])
    assert (more.loc[extended, "memorized"] >= once.loc[extended, "memorized"]).all()


def _summary_rows() -> pd.DataFrame:
    rows = []
    for heads in (1, 2, 3):
        for examples, memorized in ((8, 8), (16, 10 + heads), (32, 9 + 2 * heads)):
            rows.append(
                {
                    "sweep": "heads", "swept": "H", "value": heads, "H": heads, "n": 4, "d_h": 4,
                    "context": "shared", "task": "classification", "seed": 0,
                    "bound": 3 * heads + 1, "T": examples, "memorized": memorized,
                    "accuracy": memorized / examples, "certified": min(examples, 3 * heads + 1),
                    "certified_trained": min(examples, 3 * heads),
                }
            )  # fmt: skip
    return pd.DataFrame(rows)


def test_capacity_is_the_largest_memorized_count_and_fits_are_exact_on_a_line():
    capacity = capacity_table(_summary_rows())
    assert capacity["capacity"].tolist() == [11, 13, 15]
    assert capacity["T_at_capacity"].tolist() == [16, 32, 32]  # the first T reaching it
    assert capacity["fitted_T"].tolist() == [8, 8, 8]
    assert capacity["certified"].tolist() == [4, 7, 10]
    assert not capacity["censored"].any()
    fits = fit_table(capacity).set_index("quantity")
    assert fits.loc["capacity", "slope"] == pytest.approx(2.0)
    assert fits.loc["capacity", "r2"] == pytest.approx(1.0)
    assert fits.loc["certified", "slope"] == pytest.approx(3.0)  # n - 1
    assert fits.loc["certified", "intercept"] == pytest.approx(1.0)


def test_linear_fit_r2_drops_with_noise_and_head_dim_fits_stop_at_n():
    x = np.arange(10.0)
    assert linear_fit(x, 2 * x + 1) == pytest.approx((2.0, 1.0, 1.0))
    assert linear_fit(x, np.where(x % 2 == 0, 0.0, 5.0))[2] < 0.1
    capacity = capacity_table(_summary_rows()).assign(sweep="head_dim", swept="d_h")
    capacity["d_h"] = capacity["value"] = [2, 4, 8]
    fit = fit_table(capacity).iloc[0]
    assert (fit["points"], fit["x_max"]) == (2, 4)


def test_saturation_table_aggregates_heads_and_seeds():
    rows = pd.DataFrame(
        {
            "sweep": "heads", "H": 2, "n": 4, "d_h": 4, "context": "shared",
            "task": "classification", "T": 8, "seed": [0, 0, 1, 1], "head": [0, 1, 0, 1],
            "saturation": [0.0, 0.5, 1.0, 0.5],
        }
    )  # fmt: skip
    table = saturation_table(rows)
    assert table[["saturation_mean", "saturation_min", "saturation_max"]].values.tolist() == [
        [0.5, 0.0, 1.0]
    ]


def test_late_loss_drop_and_the_under_trained_flag():
    from memcap.training.plateau import late_loss_drop, still_learning

    curve = np.array([[4.0, 4.0], [2.0, 1.0], [1.0, 1.0], [1.0, 1.0], [0.5, 1.0]])
    np.testing.assert_allclose(late_loss_drop(curve), [0.5, 0.0])
    # Each replica's own evaluations: the second left after two (its tail is rows 1-2: 1.0
    # to 1.0), the first's last fifth of three evaluations is rows 2-3 (1.0 to 1.0).
    np.testing.assert_allclose(late_loss_drop(curve, np.array([3, 2])), [0.0, 0.0])
    np.testing.assert_allclose(late_loss_drop(curve[:, ::-1], np.array([2, 4])), [0.0, 0.5])
    learning = still_learning(curve, np.array([4, 4]), np.array([False, False]))
    assert learning.tolist() == [True, False]
    assert not still_learning(curve, np.array([4, 4]), np.array([True, False])).any()
    rows = {"sweep": "heads", "swept": "H", "value": 1, "H": 1, "n": 2, "d_h": 2}
    rows |= {"context": "shared", "task": "classification", "bound": 2, "certified": 1}
    rows |= {"certified_trained": 1}
    table = pd.DataFrame(
        [
            {**rows, "seed": 0, "T": 8, "memorized": 6, "accuracy": 0.75, "late_loss_drop": 0.2},
            {**rows, "seed": 1, "T": 8, "memorized": 6, "accuracy": 0.75, "late_loss_drop": 0.0},
        ]
    )
    assert capacity_table(table)["under_trained"].tolist() == [True, False]


def test_the_authors_recipe_steps_grow_with_t():
    config = {"seed": 0, "device": "cpu", "synthetic": {"sweeps": {"heads": {"recipe": "authors"}}}}
    validate(config, str(ROOT / "workflow/schemas/config.schema.yaml"))
    section = config["synthetic"]
    stage = StageSettings.from_config(section, 0, config["engine"])
    cfg = stage.train_config(sweep_spec(section, "heads"), 40000)
    assert cfg.steps == max(50000, -(-500 * 40000 // 256)) == 78125
    assert (cfg.batch_size, cfg.best_by, cfg.warmup_start) == (256, "loss", 0.01)


def test_the_engine_section_reaches_both_recipes_train_configs():
    config = _config()
    default = StageSettings.from_config(config["synthetic"], 0, config["engine"])
    assert (default.precision, default.compile) == ("float32", False)
    config["engine"] |= {"precision": "bf16", "compile": True}
    config["engine"]["synthetic"] |= {"leave_when_fit": True, "group_by": ["shape"]}
    section = config["synthetic"]
    stage = StageSettings.from_config(section, 0, config["engine"])
    assert stage.group_by == ("shape",) and stage.max_padding is None
    for name in ("heads", "head_dim"):  # ours and the authors' recipe in configs/test.yaml
        cfg = stage.train_config(sweep_spec(section, name), 16)
        assert cfg.precision == "bf16"
        assert cfg.compile and cfg.leave_when_fit


def test_bound_ratios_compare_best_seeds_with_h_n_minus_1_plus_1():
    counts = {"regression": {1: (4, 8), 2: (30, 20)}, "classification": {1: (40, 16), 2: (60, 75)}}
    rows = [
        {"sweep": "heads", "task": task, "context": "shared", "value": h, "seed": seed,
         "capacity": capacity, "bound": 7 * h + 1}
        for task, per_h in counts.items()
        for h, seeds in per_h.items()
        for seed, capacity in enumerate(seeds)
    ]  # fmt: skip
    table = bound_ratios(pd.DataFrame(rows)).set_index("task")
    assert table.loc["regression", "ratio_min"] == pytest.approx(1.0)  # 8 of 8 at H = 1
    assert table.loc["regression", "ratio_max"] == pytest.approx(2.0)  # 30 of 15 at H = 2
    assert table.loc["classification", "ratio_median"] == pytest.approx((5 + 5) / 2)
    assert table.loc["regression", "below_bound"] == 0


def _own_copies(data: ReplicaData) -> ReplicaData:
    """The same training sets as one full copy per replica (no shared rows, no one-row
    contexts)."""
    T = data.targets.shape[1]
    inputs = tuple(x.expand(-1, T, *x.shape[2:]).contiguous() for x in data.replica_inputs())
    return ReplicaData(inputs, data.targets, data.sizes)


def test_shared_dataset_storage_and_analysis_blocks_leave_the_rows_unchanged(monkeypatch):
    """Mini-batch models store each distinct dataset once and gather every replica's rows
    from it, and sweeps analyse trained attention a block of replicas at a time: the rows are
    those of one copy per replica analysed at once (losses to float32 rounding)."""
    import memcap.synthetic.results as results_module
    import memcap.synthetic.sweep as batched

    config = _config()
    section = config["synthetic"]
    stage = StageSettings.from_config(section, config["seed"], config["engine"])
    spec = sweep_spec(section, "head_dim")
    assert stage.train_config(spec, 16).batch_size is not None
    stored = []
    stack = batched._stack
    monkeypatch.setattr(batched, "_stack", lambda *args: stored.append(stack(*args)) or stored[-1])
    shared = run_sweep(spec, stage, torch.device("cpu")).table
    assert any(data.source is not None for data in stored)
    monkeypatch.setattr(batched, "_stack", lambda *args: _own_copies(stack(*args)))
    monkeypatch.setattr(results_module, "ANALYSIS_BYTES", 1)  # one replica a block
    copies = run_sweep(spec, stage, torch.device("cpu")).table
    counts = ["memorized", "certified", "certified_trained", "fit_step", "steps_run"]
    pd.testing.assert_frame_equal(shared[counts], copies[counts])
    pd.testing.assert_frame_equal(shared, copies, check_exact=False, rtol=1e-4)


def test_one_context_rows_train_as_every_examples_own_copy(monkeypatch):
    """Grouped by context kind, a mini-batch model of shared contexts stores one context row
    per dataset, which every example reads: the rows of one copy per example."""
    import memcap.synthetic.sweep as batched

    config = _config()
    config["engine"]["synthetic"]["group_by"] = ["context"]
    section = config["synthetic"]
    section["sweeps"]["head_dim"]["contexts"] = ["shared", "random"]
    stage = StageSettings.from_config(section, config["seed"], config["engine"])
    spec = sweep_spec(section, "head_dim")
    stored, stack = [], batched._stack
    monkeypatch.setattr(batched, "_stack", lambda *args: stored.append(stack(*args)) or stored[-1])
    one = run_sweep(spec, stage, torch.device("cpu")).table
    assert any(data.inputs[1].shape[1] == 1 for data in stored)
    monkeypatch.setattr(batched, "_stack", lambda *args: _own_copies(stack(*args)))
    copies = run_sweep(spec, stage, torch.device("cpu")).table
    assert set(one["context"]) == {"shared", "random"}
    pd.testing.assert_frame_equal(one, copies, check_exact=False, rtol=1e-4)
