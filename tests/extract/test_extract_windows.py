"""Windowed attention (Swin, timm and transformers): each layer's context is window 0 of the
block that reads it, exactly what that block's attention attends within; n and d per stage,
shifted windows named; the query is the window's first token."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from memcap.errors import ConfigError
from memcap.extract.config import ExtractSettings
from memcap.extract.entries import model_entry
from memcap.extract.inputs import check_against_model, resolve_n
from memcap.extract.job import ExtractOutputs, extract_layers
from memcap.extract.registry import architecture
from memcap.extract.windows import WindowedTrunk, window_blocks, window_layers

# 32 px images, 2 px patches: a 16 x 16 grid of 4 x 4 windows, then 8 x 8 (two stages of two
# blocks: regular, shifted), widths 16 and 32.
TIMM_SWIN = {"img_size": 32, "patch_size": 2, "window_size": 4, "embed_dim": 16,
             "depths": [2, 2], "num_heads": [1, 2]}  # fmt: skip
HF_SWIN = {"image_size": 32, "patch_size": 2, "window_size": 4, "embed_dim": 16,
           "depths": [2, 2], "num_heads": [1, 2]}  # fmt: skip


def _timm_swin(name: str = "swin_tiny_patch4_window7_224") -> torch.nn.Module:
    import timm

    torch.manual_seed(0)
    return timm.create_model(name, **TIMM_SWIN).eval()


def _hf_swin() -> torch.nn.Module:
    from transformers import SwinConfig, SwinModel

    torch.manual_seed(0)
    return SwinModel(SwinConfig(**HF_SWIN)).eval()


def test_layers_read_the_windows_of_the_next_block():
    layers = window_layers(_timm_swin())
    assert [layer.stage for layer in layers] == [0, 0, 0, 1, 1]
    assert [layer.shift for layer in layers] == [(0, 0), (2, 2), (0, 0), (2, 2), (0, 0)]
    assert [layer.read_by for layer in layers] == [1, 2, None, 4, None]  # stage ends: no reader
    assert [(layer.n, layer.width, layer.heads) for layer in layers] == [(16, 16, 1)] * 3 + [
        (16, 32, 2)
    ] * 2
    assert [layer.grid for layer in layers] == [(16, 16)] * 3 + [(8, 8)] * 2
    assert window_layers(_hf_swin()) == layers  # the same geometry from transformers' blocks


@pytest.mark.parametrize("library", ["timm", "timm-v2", "transformers"])
def test_each_context_is_what_the_reading_blocks_attention_attends_within(library):
    models = {
        "timm": _timm_swin,
        "timm-v2": lambda: _timm_swin("swinv2_tiny_window8_256"),
        "transformers": _hf_swin,
    }
    model = models[library]()
    blocks = [block for _, block in window_blocks(model)]
    seen: dict[int, torch.Tensor] = {}  # block (1-based) -> its attention's input windows

    def keep(index):
        def hook(_module, args, kwargs):
            seen[index] = (args[0] if args else kwargs["hidden_states"]).detach().clone()

        return hook

    attentions = [getattr(block, "attn", None) or block.attention for block in blocks]
    handles = [
        a.register_forward_pre_hook(keep(j + 1), with_kwargs=True) for j, a in enumerate(attentions)
    ]
    images = torch.randn(3, 3, 32, 32)
    with torch.inference_mode():
        states = WindowedTrunk(model, len(blocks)).all_hidden_states(images)
    for handle in handles:
        handle.remove()
    layers = window_layers(model)
    assert len(states) == len(layers) == 5
    for k, (context, layer) in enumerate(zip(states, layers, strict=True)):
        assert context.shape == (3, layer.n, layer.width)
        if layer.read_by is None:
            continue
        block = blocks[layer.read_by - 1]
        # the attention reads the block's pre-norm of the states (Swin V2: the states, post-norm)
        norms = {"timm": "norm1", "transformers": "layernorm_before"}
        norm = getattr(block, norms[library]) if library in norms else torch.nn.Identity()
        windows = seen[layer.read_by].reshape(3, -1, layer.n, layer.width)  # (B, windows, n, d)
        with torch.inference_mode():
            torch.testing.assert_close(norm(context), windows[:, 0], rtol=1e-6, atol=1e-6)
        mask = getattr(block, "attn_mask", None)
        if mask is not None:  # window 0 is whole: its mask is zero
            assert not mask[0].any(), k


def _swin_entry(**changes):
    raw = {
        "name": "swin-tiny",
        "family": "vit",
        "model": "swin_tiny_patch4_window7_224",
        "model_kwargs": TIMM_SWIN,
        "layers": [0, 1, 2, 3, 4, "random_attention"],
        "data": {"T": 10},
    }
    return model_entry({**raw, **changes}, 0, 0)


@pytest.mark.parametrize("source", ["timm", "config class", "directory"])
def test_a_swin_job_writes_each_layers_window_with_its_stage(tmp_path, source):
    entry = _swin_entry()
    if source == "config class":
        entry = _swin_entry(model="SwinConfig", model_kwargs=HF_SWIN)
    if source == "directory":  # save_pretrained: a hub id's files, read the same way
        _hf_swin().save_pretrained(tmp_path / "swin")
        weights = str(tmp_path / "swin")
        entry = _swin_entry(model=weights, weights=weights, model_kwargs={})
    folder = Path(tmp_path) / "out"
    outputs = {
        layer: ExtractOutputs(*(folder / str(layer) / f for f in ("q.npy", "c.npy", "p.json")))
        for layer in entry.layers
    }
    for files in outputs.values():
        files.queries.parent.mkdir(parents=True)
    extract_layers(entry, outputs, ExtractSettings(batch_size=4, device="cpu"))
    widths = {0: 16, 1: 16, 2: 16, 3: 32, 4: 32, "random_attention": 16}
    for layer, files in outputs.items():
        queries, contexts = np.load(files.queries), np.load(files.contexts)
        provenance = json.loads(files.provenance.read_text())
        d = widths[layer]
        assert contexts.shape == (10, 16, d) and queries.shape == (10, d), layer
        assert (provenance["n"], provenance["d"], provenance["query_index"]) == (16, d, 0)
        np.testing.assert_array_equal(queries, contexts[:, 0])  # the window's first token
        assert provenance["positions"] == "relative_bias" and provenance["prefix_tokens"] == 0
        window = provenance["window"]
        assert window["shifted"] == (layer in (1, 3)), layer
        assert window["first_token"] == ([2, 2] if window["shifted"] else [0, 0])
        assert provenance["heads"] == (2 if d == 32 else 1)
        assert provenance["stages"] == [
            {"stage": 0, "blocks": [1, 2], "grid": [16, 16], "window": [4, 4], "n": 16,
             "d": 16, "heads": 1},
            {"stage": 1, "blocks": [3, 4], "grid": [8, 8], "window": [4, 4], "n": 16,
             "d": 32, "heads": 2},
        ]  # fmt: skip
        assert provenance["forward_error"]["queries"]["none"]["vector_worst"] < 1e-5
        if source == "directory":
            assert provenance["weights_source"] == f"pretrained from {tmp_path / 'swin'}"


def test_n_and_a_query_outside_the_window_are_refused():
    arch = architecture(_swin_entry())
    with pytest.raises(ConfigError) as info:
        resolve_n(_swin_entry(n=8), arch)
    assert info.value.key == "extract.models[0].n" and "attends within windows" in str(info.value)
    entry = _swin_entry(query_index=16)
    with pytest.raises(ConfigError) as info:
        check_against_model(entry, 3, resolve_n(entry, arch), arch)
    assert info.value.key == "extract.models[0].query_index"
    assert "outside a context of n = 16 tokens (layer 3)" in str(info.value)


def test_a_grid_that_is_no_whole_number_of_windows_is_named():
    kwargs = {**TIMM_SWIN, "img_size": 40}  # a 20 x 20 grid of 4 x 4 windows, then 10 x 10
    with pytest.raises(ConfigError) as info:
        architecture(_swin_entry(model_kwargs=kwargs))
    assert info.value.key == "extract.models[0].model_kwargs"
    assert "grid 10 x 10 is no whole number of 4 x 4 windows" in str(info.value)
