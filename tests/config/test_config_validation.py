"""Bad configs stop the run before any job, with a message naming the key."""

import copy
from pathlib import Path

import pytest
import yaml
from config_edits import dry_run, set_key

from memcap.config_schema import validate_schema
from memcap.errors import ConfigError
from memcap.validation import check_config, check_old_keys

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def _default() -> dict:
    return yaml.safe_load((ROOT / "config.yaml").read_text())


def _check(config: dict) -> None:
    """What the workflow does at start-up: moved keys, schema validation, cross-field checks."""
    check_old_keys(config)
    validate_schema(config, SCHEMA)
    check_config(config)


# (case id, path to change, new value, text the error must contain)
BAD = [
    ("wrong type of seed", ["seed"], "zero", "seed"),
    ("negative seed", ["seed"], -1, "seed"),
    ("unknown top-level key", ["colour"], "blue", "colour"),
    ("unknown device", ["device"], "tpu", "device"),
    ("unknown key in a model entry", ["extract", "models", 0, "wieghts"], "random", "wieghts"),
    ("unknown model family", ["extract", "models", 0, "family"], "llama", "family"),
    ("T of zero examples", ["extract", "models", 0, "data", "T"], 0, "T"),
    ("layer that is not a layer", ["extract", "models", 0, "layers"], ["banana"], "layers"),
    (
        "detail layer not extracted",
        ["extract", "models", 0, "detail_layers"],
        [0, 5],
        "extract.models[0].detail_layers",
    ),
    ("no orderings for depth rows", ["assumptions", "depth_samples"], 0, "depth_samples"),
    ("non-integer batch size", ["extract", "batch_size"], 2.5, "batch_size"),
    ("unknown synthetic sweep key", ["synthetic", "sweeps", "heads", "valeus"], [1], "valeus"),
    ("empty synthetic sweep", ["synthetic", "sweeps", "heads", "values"], [], "values"),
    ("no seeds for one sweep", ["synthetic", "sweeps", "head_dim", "seeds"], 0, "seeds"),
    (
        "synthetic T grid not increasing",
        ["synthetic", "sweeps", "heads", "T"],
        [64, 32],
        "synthetic.sweeps.heads.T",
    ),
    ("negative learning rate", ["aot", "train", "lr"], -0.1, "lr"),
    ("aot head dim above d", ["aot", "sweeps", "heads", "d_h"], 12, "aot.sweeps.heads.d_h"),
    ("aot without heads", ["aot", "sweeps", "heads", "H"], [0], "H"),
    ("unknown aot schedule", ["aot", "train", "schedule"], "exponential", "schedule"),
    ("stage switch that is not a boolean", ["aot", "enabled"], "yes", "enabled"),
]


@pytest.mark.parametrize(("path", "value", "key"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_config_is_rejected_naming_the_key(path, value, key):
    config = set_key(copy.deepcopy(_default()), path, value)
    with pytest.raises(ConfigError) as excinfo:
        _check(config)
    assert key in str(excinfo.value)


# (case id, path of a key of the old config shape, its value, the new key the error names)
MOVED = [
    ("real capacity in synthetic", ["synthetic", "real_capacity"], {"max_H": 2}, "capacity"),
    ("aot learning rate at section level", ["aot", "lr"], 0.1, "aot.train.lr"),
    ("aot epochs at section level", ["aot", "epochs"], 10, "aot.train.epochs"),
    ("aot sweep epochs", ["aot", "sweeps", "heads", "epochs"], 10, "train.epochs"),
    ("synthetic sweep steps", ["synthetic", "sweeps", "heads", "steps"], 10, "train.steps"),
    ("synthetic seeds as a list", ["synthetic", "seeds"], [0, 1], "synthetic.seeds: 2"),
]


@pytest.mark.parametrize(
    ("path", "value", "new"), [m[1:] for m in MOVED], ids=[m[0] for m in MOVED]
)
def test_keys_of_the_old_shape_name_the_new_key(path, value, new):
    config = set_key(copy.deepcopy(_default()), path, value)
    with pytest.raises(ConfigError, match=new.replace(".", r"\.")) as excinfo:
        _check(config)
    assert excinfo.value.key == ".".join(map(str, path))


def test_snakemake_names_the_new_key_of_an_old_config_before_any_job(tmp_path):
    config = _default()
    config["synthetic"]["real_capacity"] = {"max_H": 3}
    result, output = dry_run(config, tmp_path)
    assert result.returncode != 0
    assert "synthetic.real_capacity" in output and "use capacity instead" in output
    assert "Job stats" not in output


def test_duplicate_model_names_are_rejected():
    config = _default()
    config["extract"]["models"].append(copy.deepcopy(config["extract"]["models"][0]))
    validate_schema(config, SCHEMA)
    with pytest.raises(ConfigError, match=r"extract\.models\[\d\]\.name"):
        check_config(config)


@pytest.mark.parametrize("configfile", ["config.yaml", "configs/test.yaml"])
def test_shipped_configs_are_valid(configfile):
    _check(yaml.safe_load((ROOT / configfile).read_text()))


def test_schema_gives_every_key_a_description_and_every_optional_key_a_default():
    schema = yaml.safe_load(SCHEMA.read_text())
    missing = []

    def walk(node, where):
        if not isinstance(node, dict):
            return
        for name, sub in node.get("properties", {}).items():
            if isinstance(sub, dict) and "$ref" not in sub:
                if "description" not in sub:
                    missing.append(f"{where}.{name}: description")
                if "default" not in sub and name not in node.get("required", []):
                    missing.append(f"{where}.{name}: default")
            walk(sub, f"{where}.{name}")
        for key in ("items", "additionalProperties"):
            walk(node.get(key), f"{where}[]")
        for name, sub in node.get("$defs", {}).items():
            walk(sub, f"$defs.{name}")

    walk(schema, "config")
    assert not missing, missing


def test_snakemake_stops_before_any_job_on_a_bad_config(tmp_path):
    config = _default()
    config["aot"]["sweeps"]["heads"]["d_h"] = 12
    result, output = dry_run(config, tmp_path)
    assert result.returncode != 0
    assert "aot.sweeps.heads.d_h" in output
    assert "Job stats" not in output
    assert "Traceback" not in output
