"""Typical config mistakes each give one short message: key, what was found, what is allowed
and the fix; never a dump of the schema. Defaults are filled in as Snakemake's validate does."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from config_edits import dry_run, set_key
from snakemake.utils import validate

from memcap.config_schema import key_path, validate_schema
from memcap.errors import ConfigError
from memcap.validation import OLD_KEYS, check_old_keys

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
MAX_LINES = 5


def _config() -> dict:
    return yaml.safe_load((ROOT / "config.yaml").read_text())


# (case id, path to change, new value, key the message names, texts the message must hold)
MISTAKES = [
    (
        "section set to null",
        ["synthetic"],
        None,
        "synthetic",
        ["found null", "a mapping", "delete the line 'synthetic:'"],
    ),
    (
        "model data set to null",
        ["extract", "models", 0, "data"],
        None,
        "extract.models[0].data",
        ["found null", "delete the line 'data:'"],
    ),
    (
        "wrong type",
        ["seed"],
        "zero",
        "seed",
        ["found 'zero'", "an integer >= 0", "e.g. seed: 0"],
    ),
    (
        "misspelled key",
        ["extract", "models", 0, "wieghts"],
        "random",
        "extract.models[0].wieghts",
        ["unknown key", "weights, gguf_file", "did you mean 'weights'?"],
    ),
    (
        "misspelled key of a section",
        ["aot", "train"],
        {"warmup": 0.1},
        "aot.train.warmup",
        ["unknown key", "lr, schedule, warmup_frac", "did you mean 'warmup_frac'?"],
    ),
    (
        "string where a list belongs",
        ["synthetic", "sweeps", "heads", "values"],
        "1, 2, 4",
        "synthetic.sweeps.heads.values",
        ["found '1, 2, 4'", "a list of integers >= 1", "values: [1, 2, 4]"],
    ),
    (
        "one entry where a list of entries belongs",
        ["extract", "models"],
        {"name": "vit", "family": "vit", "model": "vit_base_patch16_224"},
        "extract.models",
        ["a list of mappings", "put '- ' before its first key"],
    ),
    (
        "unknown family",
        ["extract", "models", 0, "family"],
        "llama",
        "extract.models[0].family",
        ["found 'llama'", "one of 'vit', 'encoder', 'decoder', 'bert', 'gpt2'"],
    ),
    (
        "misspelled family",
        ["extract", "models", 0, "family"],
        "decodr",
        "extract.models[0].family",
        ["did you mean 'decoder'?"],
    ),
    (
        "layer spec typo",
        ["extract", "models", 0, "layers"],
        [0, 1, "random_atention"],
        "extract.models[0].layers[2]",
        ["found 'random_atention'", "an integer >= 0 or a string", "'random_attention'?"],
    ),
    (
        "layer range object typo",
        ["extract", "models", 0, "layers"],
        {"form": 2, "every": 2},
        "extract.models[0].layers.form",
        ["from, to, every, random_attention", "did you mean 'from'?"],
    ),
    (
        "number below its minimum",
        ["aot", "sweeps", "heads", "H"],
        [0, 2],
        "aot.sweeps.heads.H[0]",
        ["found 0", "an integer >= 1"],
    ),
    (
        "head dimension neither a number nor d",
        ["aot", "sweeps", "heads", "d_h"],
        "dd",
        "aot.sweeps.heads.d_h",
        ["or 'd'", "did you mean 'd'?"],
    ),
    (
        "a sweep's own seed count below one",
        ["aot", "sweeps", "aot_vs_mlp", "seeds"],
        0,
        "aot.sweeps.aot_vs_mlp.seeds",
        ["found 0"],
    ),
    (
        "device typo",
        ["device"],
        "cuda0",
        "device",
        ["found 'cuda0'", "did you mean 'cuda'?"],
    ),
    (
        "sweep name with a dash",
        ["aot", "sweeps", "my-sweep"],
        {},
        "aot.sweeps.my-sweep",
        ["names matching", "rename it"],
    ),
]


@pytest.mark.parametrize(
    ("path", "value", "key", "texts"), [m[1:] for m in MISTAKES], ids=[m[0] for m in MISTAKES]
)
def test_a_mistake_gives_one_short_message(path, value, key, texts):
    config = set_key(_config(), path, value)
    with pytest.raises(ConfigError) as excinfo:
        validate_schema(config, SCHEMA)
    message = str(excinfo.value)
    assert excinfo.value.key == key
    assert message.startswith(f"config key '{key}': ")
    for text in texts:
        assert text in message, (text, message)
    assert "Fix: " in message
    assert len(message.splitlines()) < MAX_LINES and len(message) < 700, message
    assert "'description':" not in message and "$defs" not in message  # no schema text


def test_a_missing_required_key_is_named_with_what_it_may_be():
    config = _config()
    del config["extract"]["models"][0]["family"]
    with pytest.raises(ConfigError, match=r"extract\.models\[0\]\.family'.*required") as excinfo:
        validate_schema(config, SCHEMA)
    assert "one of 'vit', 'encoder'" in str(excinfo.value)


@pytest.mark.parametrize(
    "configfile",
    [
        "config.yaml",
        "configs/test.yaml",
        "configs/paper.yaml",
        "configs/families.yaml",
        "configs/test_families.yaml",
    ],
)
def test_defaults_are_filled_in_as_snakemake_validate_fills_them(configfile):
    ours = yaml.safe_load((ROOT / configfile).read_text())
    given = (ours.get("synthetic") or {}).get("enabled")  # the families configs switch it off
    theirs = copy.deepcopy(ours)
    validate_schema(ours, SCHEMA)
    validate(theirs, str(SCHEMA))
    assert ours == theirs
    assert ours["synthetic"]["enabled"] is (True if given is None else given)  # absent: filled


def test_defaults_are_copies_not_shared_objects():
    config = {"extract": {"models": [{"name": "a", "family": "vit", "model": "test_vit"}] * 1}}
    config["extract"]["models"].append({"name": "b", "family": "vit", "model": "test_vit"})
    validate_schema(config, SCHEMA)
    first, second = (entry["data"] for entry in config["extract"]["models"])
    assert first == second and first is not second


def test_key_paths_read_like_the_config():
    assert key_path(["extract", "models", 0, "layers", 2]) == "extract.models[0].layers[2]"
    assert key_path([]) == ""


def test_snakemake_prints_the_short_message_not_the_schema(tmp_path):
    config = yaml.safe_load((ROOT / "configs" / "test.yaml").read_text())
    config["synthetic"] = None
    result, output = dry_run(config, tmp_path)
    assert result.returncode != 0
    assert "config key 'synthetic': found null" in output
    assert "delete the line 'synthetic:'" in output
    assert len(output.splitlines()) < 10, output
    assert "Failed validating" not in output and "additionalProperties" not in output


# (case id, path of a key of an older config shape, its value, the whole one-line message)
OLD = [
    (
        "sweep key renamed",
        ["synthetic", "sweeps", "context_size", "heads"],
        2,
        "config key 'synthetic.sweeps.context_size.heads': renamed to 'H'. "
        "Fix: use synthetic.sweeps.context_size.H instead",
    ),
    (
        "T grid renamed",
        ["synthetic", "sweeps", "heads", "examples"],
        [8, 16],
        "config key 'synthetic.sweeps.heads.examples': renamed to 'T'. "
        "Fix: use synthetic.sweeps.heads.T instead",
    ),
    (
        "head dimension renamed",
        ["synthetic", "sweeps", "heads", "head_dim"],
        8,
        "config key 'synthetic.sweeps.heads.head_dim': renamed to 'd_h'. "
        "Fix: use synthetic.sweeps.heads.d_h instead",
    ),
    (
        "capacity key renamed",
        ["capacity", "max_heads"],
        8,
        "config key 'capacity.max_heads': renamed to 'max_H'. Fix: use capacity.max_H instead",
    ),
    (
        "train key renamed",
        ["synthetic", "train", "extra_rounds"],
        10,
        "config key 'synthetic.train.extra_rounds': renamed to 'extra_budgets'. "
        "Fix: use synthetic.train.extra_budgets instead",
    ),
    (
        "engine knob moved to a stage's engine section",
        ["synthetic", "group_by"],
        ["examples"],
        "config key 'synthetic.group_by': moved to engine.synthetic.group_by. "
        "Fix: use engine.synthetic.group_by instead",
    ),
    (
        "engine knob moved to the engine section",
        ["synthetic", "precision"],
        "bf16",
        "config key 'synthetic.precision': moved to engine.precision. "
        "Fix: use engine.precision instead",
    ),
    (
        "key removed",
        ["engine", "step"],
        "fast",
        "config key 'engine.step': removed (one training step remains: each model's forward "
        "and autograd's backward). Fix: delete engine.step",
    ),
    (
        "value renamed",
        ["aot", "sweeps", "heads", "variant"],
        "authors",
        "config key 'aot.sweeps.heads.variant': 'authors' is now 'code'. Fix: use variant: code",
    ),
    (
        "value in a list renamed",
        ["engine", "synthetic", "group_by"],
        ["shape", "examples"],
        "config key 'engine.synthetic.group_by': 'examples' is now 'T'. "
        "Fix: use group_by: [shape, T]",
    ),
]


@pytest.mark.parametrize(
    ("path", "value", "message"), [o[1:] for o in OLD], ids=[o[0] for o in OLD]
)
def test_a_key_or_value_of_an_older_shape_names_the_new_one_in_one_line(path, value, message):
    config = set_key(_config(), path, value)
    with pytest.raises(ConfigError) as excinfo:
        check_old_keys(config)
    assert str(excinfo.value) == message
    assert excinfo.value.key == ".".join(path)


def test_every_old_key_names_a_key_of_the_schema():
    schema = yaml.safe_load(SCHEMA.read_text())

    def properties(node: dict) -> dict:
        """The keys a (sub)schema defines, its own and those of the schema it refers to."""
        found = dict(node.get("properties", {}))
        if "$ref" in node:
            target = schema
            for part in node["$ref"].removeprefix("#/").split("/"):
                target = target[part]
            found = {**properties(target), **found}
        return found

    def holds(node: dict, parts: list[str]) -> bool:
        if not parts:
            return True
        if parts[0] == "*":  # any sweep: one of them takes the key
            options = [node.get("additionalProperties") or {}, *properties(node).values()]
            return any(holds(option, parts[1:]) for option in options)
        keys = properties(node)
        return parts[0] in keys and holds(keys[parts[0]], parts[1:])

    missing = [new for new in OLD_KEYS.values() if not holds(schema, new.split("."))]
    assert not missing, missing


def test_snakemake_names_the_new_key_of_a_renamed_one_before_any_job(tmp_path):
    config = yaml.safe_load((ROOT / "configs" / "test.yaml").read_text())
    config["aot"]["sweeps"]["aot_vs_mlp"]["variant"] = "authors"
    result, output = dry_run(config, tmp_path)
    assert result.returncode != 0
    assert "config key 'aot.sweeps.aot_vs_mlp.variant': 'authors' is now 'code'" in output
    assert "Job stats" not in output and len(output.splitlines()) < 10, output
