"""GGUF weights: a tiny Llama written with the gguf package loads through the decoder family,
with its own tokenizer, and the stored contexts are the model's own hidden states."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from memcap.errors import ConfigError
from memcap.extract.config import ExtractSettings
from memcap.extract.entries import model_entry
from memcap.extract.inputs import prepare_inputs
from memcap.extract.job import ExtractOutputs, run_extraction
from memcap.extract.registry import create_model
from memcap.extract.sizes import known_sizes

gguf = pytest.importorskip("gguf")
D, BLOCKS, FF, HEADS, KV_HEADS = 32, 2, 64, 4, 2
TOKENS = ["<unk>", "<s>", "</s>"] + [chr(c) for c in range(ord("a"), ord("z") + 1)] + [" "]


def write_tiny_llama(path: Path, tokenizer: bool = True) -> None:
    """A random float32 Llama (2 blocks, d = 32) with a character-level tokenizer (or none)."""
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(BLOCKS)
    writer.add_context_length(64)
    writer.add_embedding_length(D)
    writer.add_feed_forward_length(FF)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(D // HEADS)
    writer.add_vocab_size(len(TOKENS))
    if tokenizer:
        writer.add_tokenizer_model("llama")
        writer.add_token_list(TOKENS)
        writer.add_token_types([3, 3, 3] + [1] * (len(TOKENS) - 3))
        writer.add_token_scores([0.0] * len(TOKENS))
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    rng = np.random.default_rng(0)
    kv = D * KV_HEADS // HEADS
    shapes = {"token_embd.weight": (len(TOKENS), D), "output_norm.weight": (D,)}
    for i in range(BLOCKS):
        shapes |= {
            f"blk.{i}.attn_norm.weight": (D,),
            f"blk.{i}.attn_q.weight": (D, D),
            f"blk.{i}.attn_k.weight": (kv, D),
            f"blk.{i}.attn_v.weight": (kv, D),
            f"blk.{i}.attn_output.weight": (D, D),
            f"blk.{i}.ffn_norm.weight": (D,),
            f"blk.{i}.ffn_gate.weight": (FF, D),
            f"blk.{i}.ffn_up.weight": (FF, D),
            f"blk.{i}.ffn_down.weight": (D, FF),
        }
    for name, shape in shapes.items():
        writer.add_tensor(name, rng.normal(scale=0.2, size=shape).astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("gguf") / "tiny-llama.F32.gguf"
    write_tiny_llama(path)
    return path


def entry_for(path: Path, **changes):
    raw = {"name": "tiny-gguf", "family": "decoder", "model": "tiny-llama", "n": 16}
    return model_entry({**raw, "weights": str(path), "data": {"T": 24}, **changes}, 0, 0)


def test_header_gives_sizes_before_any_job(tiny_gguf):
    sizes = known_sizes(entry_for(tiny_gguf))
    assert (sizes.depth, sizes.positions) == (BLOCKS, 64)
    assert sizes.parameters == sum(
        int(np.prod(t.shape)) for t in gguf.GGUFReader(str(tiny_gguf)).tensors
    )


def test_gguf_decoder_extracts_its_own_hidden_states(tiny_gguf, tmp_path):
    entry = entry_for(tiny_gguf)
    outputs = ExtractOutputs(*(tmp_path / f for f in ("q.npy", "c.npy", "p.json")))
    run_extraction(entry, 1, ExtractSettings(batch_size=24, device="cpu"), outputs)
    provenance = json.loads(outputs.provenance.read_text())
    loaded = create_model(entry)
    batch = next(prepare_inputs(entry, loaded, 16, batch_size=24).batches)
    with torch.no_grad():
        own = loaded.module(**batch, output_hidden_states=True).hidden_states[1]
    # float32 from two calls (the job's truncated, hooked forward; the model's own): 1e-5
    # relative is ~100 ULP, far below the O(1) gap to another token's or layer's state
    np.testing.assert_allclose(np.load(outputs.contexts), own.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(  # the last token
        np.load(outputs.queries), own[:, -1].numpy(), rtol=1e-5, atol=1e-5
    )
    assert provenance["weights_origin"]["route"] == "gguf"
    assert len(provenance["weights_origin"]["file_sha256"]) == 64
    assert "GGUF" in provenance["weights_source"] and provenance["tokenizer_substitute"] is None
    assert provenance["depth"] == BLOCKS and provenance["d"] == D


def test_gguf_without_the_gguf_package_is_a_config_error(tiny_gguf, monkeypatch):
    import memcap.extract._hf_models as hf_models

    monkeypatch.setattr(hf_models, "package_root", lambda name: None)
    with pytest.raises(ConfigError, match="needs the 'gguf' package") as info:
        hf_models.hf_config(entry_for(tiny_gguf))
    assert info.value.key == "extract.models[0].gguf_file"


def test_device_map_loads_through_accelerate(tiny_gguf, tmp_path):
    """device_map places the blocks with accelerate; the stored states do not change."""
    settings = ExtractSettings(batch_size=24, device="cpu")
    arrays = []
    for name, device_map in (("plain", None), ("mapped", "cpu")):
        outputs = ExtractOutputs(*(tmp_path / f"{name}.{f}" for f in ("q.npy", "c.npy", "json")))
        run_extraction(entry_for(tiny_gguf, device_map=device_map), 1, settings, outputs)
        arrays.append(np.load(outputs.contexts))
        assert json.loads(outputs.provenance.read_text())["device_map"] == device_map
    # float32 from two loading routes (accelerate's dispatch, or none): 1e-6 relative is ~10
    # ULP, as for a reloaded checkpoint in test_extract_job; other weights differ by O(1)
    np.testing.assert_allclose(*arrays, rtol=1e-6, atol=1e-6)


def test_gguf_without_tokenizer_data_is_a_tokenizer_error(tmp_path):
    path = tmp_path / "no-tokenizer.F32.gguf"
    write_tiny_llama(path, tokenizer=False)
    outputs = ExtractOutputs(tmp_path / "q.npy", tmp_path / "c.npy", tmp_path / "p.json")
    with pytest.raises(ConfigError, match="holds no tokenizer data") as excinfo:
        run_extraction(entry_for(path), 1, ExtractSettings(batch_size=8, device="cpu"), outputs)
    assert excinfo.value.key == "extract.models[0].tokenizer"
    assert "byte-bpe" in str(excinfo.value)
    assert not outputs.queries.exists()
