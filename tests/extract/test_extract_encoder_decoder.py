"""The encoder stack of an encoder-decoder (T5, BART, mBART) audited as an encoder: its blocks'
hidden states at every layer, the decoder never run, T5's positions inside attention recorded
and seen in the layer-0 contexts; config classes, a save_pretrained directory with its own
T5-style tokenizer, and a hub id read offline from a Hugging Face cache."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from memcap.extract.config import ExtractSettings
from memcap.extract.entries import model_entry
from memcap.extract.inputs import prepare_inputs
from memcap.extract.job import ExtractOutputs, extract_layers
from memcap.extract.layers import MultiLayerExtractor
from memcap.extract.registry import architecture, create_model
from memcap.extract.text import EOS

SETTINGS = ExtractSettings(batch_size=8, device="cpu")
T5_SIZES = {"d_model": 32, "d_ff": 64, "d_kv": 16, "num_layers": 2, "num_heads": 2}
BART_SIZES = {
    "d_model": 32,
    "encoder_layers": 2,
    "decoder_layers": 1,
    "encoder_attention_heads": 2,
    "decoder_attention_heads": 2,
    "encoder_ffn_dim": 64,
    "decoder_ffn_dim": 64,
    "max_position_embeddings": 64,
}
CLASSES = {
    "T5Config": {**T5_SIZES, "vocab_size": 400},
    "BartConfig": {**BART_SIZES, "vocab_size": 400},
    "MBartConfig": {**BART_SIZES, "vocab_size": 400},
}
HUB_ID = "memcap-tests/t5-tiny"


def _entry(model: str, **changes):
    raw = {
        "name": model.lower(),
        "family": "encoder",
        "model": model,
        "model_kwargs": CLASSES.get(model, {}),
        "tokenizer": "byte-bpe",
        "n": 16,
        "layers": [0, 1, 2, "random_attention"],
        "data": {"T": 12, "source": "pydocs"},
    }
    return model_entry({**raw, **changes}, 0, 0)


def _extract(entry, folder: Path) -> dict:
    """Every layer of the entry: {layer: (queries, contexts, provenance)}."""
    outputs = {
        layer: ExtractOutputs(*(folder / str(layer) / f for f in ("q.npy", "c.npy", "p.json")))
        for layer in entry.layers
    }
    for files in outputs.values():
        files.queries.parent.mkdir(parents=True)
    extract_layers(entry, outputs, SETTINGS)
    return {
        layer: (np.load(o.queries), np.load(o.contexts), json.loads(o.provenance.read_text()))
        for layer, o in outputs.items()
    }


@pytest.mark.parametrize(("model", "stack"), [("T5Config", "T5Stack"),
                                              ("BartConfig", "BartEncoder"),
                                              ("MBartConfig", "MBartEncoder")])  # fmt: skip
def test_the_encoder_stack_is_the_model_and_its_layers_are_its_hidden_states(model, stack):
    loaded = create_model(_entry(model))
    encoder = loaded.module
    assert type(encoder).__name__ == stack
    assert not any("decoder" in name for name, _ in encoder.named_modules())
    assert loaded.depth == 2 and loaded.width == 32 and loaded.architecture.heads == 2
    ids = torch.randint(3, 400, (3, 10))
    extractor = MultiLayerExtractor(encoder, loaded.width, (0, 1, 2), seed=0).eval()
    # layer 2 is block 2's output before the stack's final norm (T5, mBART), which the model
    # applies to its last hidden state
    final = getattr(encoder, "final_layer_norm", None) or getattr(encoder, "layer_norm", None)
    with torch.inference_mode():
        ours = extractor({"input_ids": ids})
        own = encoder(input_ids=ids, output_hidden_states=True)
        last = ours[2] if final is None else final(ours[2])
    for layer in (0, 1):
        torch.testing.assert_close(ours[layer], own.hidden_states[layer], rtol=0, atol=0)
    torch.testing.assert_close(last, own.last_hidden_state, rtol=1e-6, atol=1e-6)
    assert (stack == "BartEncoder") == (final is None)


def test_the_decoder_is_never_run(monkeypatch, tmp_path):
    from transformers.models.bart import modeling_bart
    from transformers.models.t5 import modeling_t5

    stacks: list[bool] = []  # is_decoder of every T5Stack that runs
    t5_forward = modeling_t5.T5Stack.forward

    def t5_stack(self, *args, **kwargs):
        stacks.append(bool(self.is_decoder))
        return t5_forward(self, *args, **kwargs)

    def bart_decoder(self, *args, **kwargs):
        raise AssertionError("the BART decoder ran")

    monkeypatch.setattr(modeling_t5.T5Stack, "forward", t5_stack)
    monkeypatch.setattr(modeling_bart.BartDecoder, "forward", bart_decoder)
    t5 = _extract(_entry("T5Config"), tmp_path / "t5")
    bart = _extract(_entry("BartConfig"), tmp_path / "bart")
    assert stacks and not any(stacks)  # the encoder ran, never a decoder stack
    for results in (t5, bart):
        for layer, (queries, contexts, _) in results.items():
            assert queries.shape == (12, 32) and contexts.shape == (12, 16, 32), layer
            np.testing.assert_array_equal(queries, contexts[:, 0])  # the first token
    assert t5[0][2]["positions"] == "relative_bias"  # T5: a bias inside attention
    assert bart[0][2]["positions"] == "additive"  # BART: learned positions on the embeddings


@pytest.fixture(scope="module")
def t5_directory(tmp_path_factory) -> Path:
    """A tiny T5ForConditionalGeneration saved with a T5-style tokenizer: no [CLS] / [SEP],
    an end-of-sequence token (a BPE trained on the Python docs)."""
    from pydoc_data.topics import topics

    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, T5Config, T5ForConditionalGeneration

    directory = tmp_path_factory.mktemp("t5") / "flan-t5-tiny"
    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<pad>", "</s>", "<unk>"])
    bpe.train_from_iterator(list(topics.values()), trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token="</s>", pad_token="<pad>", unk_token="<unk>"
    )
    tokenizer.save_pretrained(directory)
    torch.manual_seed(0)
    config = T5Config(**T5_SIZES, vocab_size=len(tokenizer), num_decoder_layers=1)
    T5ForConditionalGeneration(config).save_pretrained(directory)
    return directory


def test_a_t5_directory_with_its_own_tokenizer(t5_directory, tmp_path):
    entry = _entry(str(t5_directory), weights=str(t5_directory), tokenizer=None)
    arch = architecture(entry)
    assert arch.max_tokens is None  # T5's relative buckets set no position limit
    loaded = create_model(entry, arch)
    prepared = prepare_inputs(entry, loaded, 16, 8)
    assert prepared.details["input_format"] == EOS
    tokens = np.concatenate([batch["input_ids"].numpy() for batch in prepared.batches])
    assert tokens.shape == (12, 16)
    assert (tokens[:, -1] == _eos_id(t5_directory)).all()  # the window, then </s>
    results = _extract(entry, tmp_path)
    np.testing.assert_array_equal(results[0][2]["example_tokens_head"], tokens[:, :4])
    layer0, layer1 = results[0][1], results[1][1]
    # positions enter inside attention: at layer 0 a context has one row per distinct token;
    # one block later the relative bias has told the repeated tokens apart
    for t in range(12):
        assert len(np.unique(layer0[t], axis=0)) == len(np.unique(tokens[t]))
    assert any(len(np.unique(row)) < 16 for row in tokens)  # some window repeats a token
    assert all(len(np.unique(context, axis=0)) == 16 for context in layer1)
    assert results[0][2]["weights_source"] == f"pretrained from {t5_directory}"


def _eos_id(directory: Path) -> int:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(directory).eos_token_id


def _hub_cache(root: Path, directory: Path) -> Path:
    """A Hugging Face cache holding ``directory`` as the hub repository HUB_ID."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = root / "hub" / f"models--{HUB_ID.replace('/', '--')}"
    shutil.copytree(directory, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    return root


def test_a_hub_id_is_read_from_the_cache_offline(t5_directory, tmp_path):
    home = _hub_cache(tmp_path / "hf", t5_directory)
    code = f"""
import json
from pathlib import Path
from memcap.extract.checks import check_extract_config
from memcap.extract.config import ExtractSettings
from memcap.extract.depth import with_layers
from memcap.extract.entries import model_entries
from memcap.extract.job import ExtractOutputs, extract_layers
raw = {{"name": "flan-t5-tiny", "family": "encoder", "model": "{HUB_ID}",
       "weights": "pretrained", "layers": "all", "n": 16,
       "data": {{"T": 8, "source": "pydocs", "seed": 0}}}}
config = {{"extract": {{"models": [raw]}}}}
check_extract_config(config)
(entry,) = [with_layers(e) for e in model_entries(config)]
out = Path({str(tmp_path)!r}) / "out"
outputs = {{l: ExtractOutputs(*(out / str(l) / f for f in ("q.npy", "c.npy", "p.json")))
           for l in entry.layers}}
for o in outputs.values():
    o.queries.parent.mkdir(parents=True)
records = extract_layers(entry, outputs, ExtractSettings(batch_size=8, device="cpu"))
print(json.dumps({{str(k): [r["weights_source"], r["n"], r["d"], r["input_format"]]
                  for k, r in records.items()}}))
"""
    env = {**os.environ, "HF_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    env["MEMCAP_CACHE_DIR"] = str(tmp_path / "memcap")
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    records = json.loads(result.stdout.strip().splitlines()[-1])
    assert sorted(records) == ["0", "1", "2"]  # `all` resolved from the cached config.json
    for source, n, d, form in records.values():
        assert source == f"pretrained {HUB_ID} (Hugging Face hub / cache)"
        assert (n, d, form) == (16, 32, EOS)
