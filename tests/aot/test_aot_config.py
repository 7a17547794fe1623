"""The aot config: schema defaults, the cross-field checker, and the rules' dry run."""

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from snakemake.utils import validate

from memcap.aot.checks import check_aot_config
from memcap.aot.settings import StageSettings, sweep_memory_mb
from memcap.errors import ConfigError
from memcap.validation import check_config

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = str(ROOT / "workflow/schemas/config.schema.yaml")


def _config(aot: dict, engine: dict | None = None) -> dict:
    config = {"seed": 0, "device": "cpu", "aot": copy.deepcopy(aot), "engine": engine or {}}
    validate(config, SCHEMA)
    return config


def _stage(config: dict, seed: int) -> StageSettings:
    return StageSettings.from_config(config["aot"], seed, config["engine"])


def test_schema_fills_defaults_in_every_sweep():
    config = _config({"sweeps": {"mine": {"H": [1, 2]}}})
    aot = config["aot"]
    train = aot["train"]
    assert train["lr"] > 0 and aot["seeds"] >= 1 and train["batch_size"] is None
    spec = aot["sweeps"]["mine"]
    assert spec == {
        "task": "association",
        "models": ["aot"],
        "N": 50,
        "S": 2,
        "d": 10,
        "d_h": "d",
        "H": [1, 2],
        "depth": 1,
        "cap_d_h": False,
        "temperature": 1.0,
        "recipe": "ours",
        "variant": "paper",
        "seeds": None,
        "train": {"epochs": None, "lr": None, "batch_size": None, "sample": None},
    }
    check_aot_config(config)
    assert list(_config({})["aot"]["sweeps"]) == ["heads"]


@pytest.mark.parametrize("path", ["config.yaml", "configs/test.yaml", "configs/paper.yaml"])
def test_shipped_configs_pass(path):
    config = yaml.safe_load((ROOT / path).read_text())
    validate(config, SCHEMA)
    check_config(config)


@pytest.mark.parametrize(
    ("sweep", "key", "message"),
    [
        ({"d": 8, "d_h": 10}, "aot.sweeps.bad.d_h", "exceeds the embedding dimension"),
        ({"d": [4, 8], "d_h": 6}, "aot.sweeps.bad.d_h", "d_h = 6"),
        ({"N": 50, "S": 4}, "aot.sweeps.bad.S", "too many to enumerate"),
        ({"N": 1}, "aot.sweeps.bad.N", "N = 1"),
    ],
)
def test_impossible_sweeps_name_the_key(sweep, key, message):
    config = _config({"sweeps": {"bad": sweep}})
    with pytest.raises(ConfigError, match=message) as err:
        check_aot_config(config)
    assert err.value.key == key


def test_cap_d_h_makes_d_below_d_h_valid():
    check_aot_config(_config({"sweeps": {"d": {"d": [5, 15], "d_h": 10, "cap_d_h": True}}}))


def test_empty_sweeps_and_empty_lists_are_rejected():
    config = _config({"sweeps": {}})
    with pytest.raises(ConfigError) as err:
        check_aot_config(config)
    assert err.value.key == "aot.sweeps"
    check_aot_config(_config({"enabled": False, "sweeps": {}}))  # a disabled stage is fine
    config = _config({"sweeps": {"x": {}}})
    config["aot"]["sweeps"]["x"]["H"] = []
    with pytest.raises(ConfigError) as err:
        check_aot_config(config)
    assert err.value.key == "aot.sweeps.x.H"
    config["aot"]["sweeps"]["x"]["H"] = 0
    with pytest.raises(ConfigError, match="H >= 1"):
        check_aot_config(config)


def test_schema_rejects_unknown_keys_and_bad_values():
    for aot in (
        {"sweeps": {"x": {"heads": 3}}},
        {"train": {"lr": 0}},
        {"sweeps": {"x": {"H": [0]}}},
    ):
        with pytest.raises(Exception, match="validat|not valid|is less than|Additional"):
            _config(aot)


def test_memory_request_grows_with_the_sweep():
    small = {"N": 10, "S": 2, "d": 4, "d_h": 4, "H": [1], "models": ["aot"], "cap_d_h": False}
    small |= {"task": "association", "depth": 1, "temperature": 1.0, "variant": "paper"}
    small |= {"recipe": "ours"}
    big = small | {"N": 70, "H": [1, 31]}
    section = {"seeds": 1, "sweeps": {"s": small, "b": big}}
    assert sweep_memory_mb(section, "s") < sweep_memory_mb(section, "b")
    assert sweep_memory_mb(section, "b") < sweep_memory_mb({**section, "seeds": 4}, "b")
    own = {**section, "sweeps": {**section["sweeps"], "b": big | {"seeds": 4}}}
    assert sweep_memory_mb(own, "b") == sweep_memory_mb({**section, "seeds": 4}, "b")


def test_a_sweeps_own_seeds_override_the_stages():
    config = _config({"seeds": 2, "sweeps": {"a": {}, "b": {"seeds": 5}}})
    stage = _stage(config, seed=1)
    sweeps = config["aot"]["sweeps"]
    assert stage.replicate_seeds(sweeps["a"]) == stage.replicate_seeds() == [1000, 1001]
    # replicate k is the same seed in every sweep: more seeds add replicates
    assert stage.replicate_seeds(sweeps["b"]) == [1000, 1001, 1002, 1003, 1004]
    with pytest.raises(Exception, match="validat|not valid|is less than"):
        _config({"sweeps": {"x": {"seeds": 0}}})


def test_a_sweeps_own_train_block_overrides_the_stages():
    config = _config({"train": {"epochs": 5}, "sweeps": {"a": {}, "b": {"train": {"epochs": 9}}}})
    stage = _stage(config, seed=1)
    sweeps = config["aot"]["sweeps"]
    assert stage.train_config(sweeps["a"], T=100, task="association", model="aot").steps == 5
    assert stage.train_config(sweeps["b"], T=100, task="association", model="aot").steps == 9
    batched = StageSettings.from_config(
        {**config["aot"], "train": {**stage.train, "batch_size": 30}}, 1, config["engine"]
    )
    assert batched.train_config(sweeps["b"], T=100, task="association", model="aot").steps == 9 * 4
    assert not stage.train_config(sweeps["a"], T=100, task="distribution", model="aot").early_stop
    assert stage.replicate_seeds() == [1000, 1001]


def test_dry_run_of_the_aot_targets(tmp_path):
    targets = ["results/aot/summary.csv", "results/aot/fits.csv", "results/aot/figures"]
    cmd = [sys.executable, "-m", "snakemake", *targets, "-n", "-s", str(ROOT / "Snakefile")]
    cmd += ["--directory", str(tmp_path), "--configfile", str(ROOT / "configs/test.yaml")]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr + done.stdout
    for rule in ("train_aot", "summarize_aot", "plot_aot"):
        assert rule in done.stdout


def test_the_authors_recipe_counts_epochs_of_the_sample_and_decays_per_epoch():
    config = _config(
        {
            "authors": {"sample": 64, "batch_size": 16, "epochs": 3, "lr": 0.01},
            "sweeps": {
                "a": {"recipe": "authors"},
                "b": {"recipe": "authors", "train": {"sample": 32}},
            },
        }
    )
    stage = _stage(config, seed=0)
    sweeps = config["aot"]["sweeps"]
    cfg = stage.train_config(sweeps["a"], T=2500, task="association", model="aot")
    assert (cfg.steps, cfg.lr_period, cfg.sampling, cfg.early_stop) == (12, 4, "shuffle", False)
    assert cfg.final_lr_frac == pytest.approx(5e-4 / 0.01)
    assert cfg.last_batches == 12  # at most every batch
    mlp = stage.train_config(sweeps["a"], T=2500, task="association", model="mlp")
    assert mlp.final_lr_frac == pytest.approx(1e-4 / 0.01)
    assert stage.sample_size(sweeps["b"]) == 32 and stage.sample_size(sweeps["a"]) == 64
    assert stage.train_config(sweeps["b"], T=2500, task="association", model="aot").steps == 6


@pytest.mark.parametrize(
    ("aot", "key"),
    [
        (
            {"sweeps": {"a": {"recipe": "authors", "train": {"sample": 8}}}},
            "aot.sweeps.a.train.sample",
        ),
        (
            {"authors": {"final_lr": 1.0}, "sweeps": {"a": {"recipe": "authors"}}},
            "aot.authors.final_lr",
        ),
    ],
)
def test_impossible_authors_recipes_name_the_key(aot, key):
    with pytest.raises(ConfigError, match=key):
        check_aot_config(_config(aot))


def test_a_train_key_of_the_other_recipe_is_rejected():
    with pytest.raises(ConfigError, match="aot.sweeps.a.train.sample"):
        check_aot_config(_config({"sweeps": {"a": {"train": {"sample": 64}}}}))


def test_the_engine_section_reaches_both_recipes_train_configs():
    sweeps = {"a": {}, "b": {"recipe": "authors"}}
    default = _stage(_config({"sweeps": sweeps}), seed=0)
    assert default.pad_replicas and default.precision == "float32"
    engine = {"precision": "bf16", "compile": True}
    config = _config({"sweeps": sweeps}, engine | {"aot": {"pad_replicas": False}})
    stage = _stage(config, seed=0)
    assert not stage.pad_replicas
    for spec in config["aot"]["sweeps"].values():
        cfg = stage.train_config(spec, T=100, task="association", model="aot")
        assert (cfg.precision, cfg.compile) == ("bf16", True)
        assert not cfg.leave_when_fit  # paper A's option only
