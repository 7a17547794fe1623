"""configs/scale.yaml (issue 25) and the extraction path it needs: random weights drawn on the
job's device at its precision, config-class sizes checked, every block planned."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from memcap.errors import ConfigError
from memcap.extract.depth import with_layers
from memcap.extract.entries import model_entries, model_entry
from memcap.extract.layer_spec import layer_name
from memcap.extract.registry import architecture, create_model, parameter_checksum

ROOT = Path(__file__).resolve().parents[2]
SCALE = yaml.safe_load((ROOT / "configs" / "scale.yaml").read_text())
TINY = {
    "gpt2": {"model": "GPT2Config", "model_kwargs": {"n_embd": 32, "n_layer": 2, "n_head": 2}},
    "llama": {
        "model": "LlamaConfig",
        "model_kwargs": {
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "intermediate_size": 64,
            "vocab_size": 1000,
        },
    },
    "bert": {
        "model": "BertConfig",
        "model_kwargs": {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2},
        "family": "encoder",
    },
}
TINY_VIT = {"img_size": 32, "patch_size": 8, "embed_dim": 32, "depth": 2, "num_heads": 2}


def tiny(kind: str, **extra):
    raw = {"name": kind, "family": "decoder", "tokenizer": "byte-bpe", **TINY[kind], **extra}
    return model_entry(raw, 0, 0)


def test_scale_config_names_the_issue_models_in_bfloat16_with_t_at_least_d():
    entries = {e.name: e for e in model_entries(SCALE)}
    widths = {"gpt2-large-random": 1280, "llama-7b-random": 4096, "vit-l16-random": 1024}
    assert set(entries) == set(widths) and SCALE["device"] == "auto"
    assert SCALE["assumptions"]["samples"] == 5000
    assert SCALE["assumptions"]["kruskal_search"] == "device"  # the checks search on the GPU
    gpt2 = entries["gpt2-large-random"]
    assert (gpt2.model_kwargs["n_embd"], gpt2.model_kwargs["n_layer"], gpt2.data.T) == (
        1280,
        36,
        2000,
    )
    assert entries["llama-7b-random"].data.T == 4096
    for name, entry in entries.items():
        assert entry.precision == "bfloat16" and entry.weights == "random"
        assert widths[name] <= entry.data.T, name
        assert entry.detail_layers == (0, 1, "random_attention")
    llama = entries["llama-7b-random"].model_kwargs
    assert (llama["hidden_size"], llama["num_hidden_layers"], llama["intermediate_size"]) == (
        4096,
        32,
        11008,
    )


def test_dry_run_of_scale_config_plans_every_block_of_every_model():
    result = subprocess.run(
        [str(Path(sys.executable).parent / "snakemake"), "-n", "--forceall"]
        + ["--configfile", "configs/scale.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    stats = result.stdout.split("Job stats:", 1)[1]
    counts = {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", stats, re.M)}
    assert counts["extract_model"] == 3
    assert counts["check_assumptions"] == 38 + 34 + 26  # scale.yaml cuts the checks per layer
    config = yaml.safe_load((ROOT / "configs" / "scale.yaml").read_text())
    for name, blocks in (
        ("gpt2-large-random", 36),
        ("llama-7b-random", 32),
        ("vit-l16-random", 24),
    ):
        assert f"output: results/extract/{name}\n" in result.stdout, name
        entry = with_layers(next(e for e in model_entries(config) if e.name == name))
        planned = {layer_name(layer) for layer in entry.layers}
        assert planned == {str(k) for k in range(blocks + 1)} | {"random_attention"}, name
        assert len(entry.detail_layers) == 3  # contexts of the detail layers only


@pytest.mark.parametrize("kind", ["gpt2", "bert"])
def test_float32_on_the_cpu_draws_the_same_weights_as_before(kind):
    """The default run's random models keep their weights: the legacy route, bit for bit."""
    import transformers

    entry = tiny(kind)
    torch.manual_seed(entry.seed)
    config = getattr(transformers, entry.model)(**entry.model_kwargs)
    legacy = transformers.AutoModel.from_config(config)
    assert parameter_checksum(create_model(entry).module) == parameter_checksum(legacy)


def test_float32_timm_vit_on_the_cpu_draws_the_same_weights_as_before():
    import timm

    raw = {"name": "v", "family": "vit", "model": "vit_base_patch16_224", "model_kwargs": TINY_VIT}
    torch.manual_seed(0)
    legacy = timm.create_model("vit_base_patch16_224", **TINY_VIT)
    ours = create_model(model_entry(raw, 0, 0)).module
    assert parameter_checksum(ours) == parameter_checksum(legacy)


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_bfloat16_weights_are_drawn_in_bfloat16_as_the_rounded_float32_draws(kind):
    full = create_model(tiny(kind)).module
    half = create_model(tiny(kind, precision="bfloat16")).module
    assert all(p.dtype == torch.bfloat16 for p in half.parameters())
    for (name, a), b in zip(full.state_dict().items(), half.state_dict().values(), strict=True):
        if a.is_floating_point():
            assert torch.equal(a.to(torch.bfloat16), b), name


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_random_weights_are_drawn_on_the_jobs_device(kind):
    """The meta device stands in for a GPU: nothing is built on the host first."""
    loaded = create_model(tiny(kind, precision="bfloat16"), device="meta")
    assert {p.device.type for p in loaded.module.parameters()} == {"meta"}
    assert {p.dtype for p in loaded.module.parameters()} == {torch.bfloat16}
    assert "drawn on meta in bfloat16" in loaded.weights_source


def test_timm_random_weights_are_drawn_on_the_jobs_device():
    raw = {"name": "v", "family": "vit", "model": "vit_base_patch16_224", "model_kwargs": TINY_VIT}
    loaded = create_model(model_entry({**raw, "precision": "bfloat16"}, 0, 0), device="meta")
    assert {p.device.type for p in loaded.module.parameters()} == {"meta"}
    assert {p.dtype for p in loaded.module.parameters()} == {torch.bfloat16}


def test_a_misspelt_config_field_is_one_error_naming_the_key_and_the_field():
    entry = tiny("llama")
    bad = model_entry(
        {
            "name": "x",
            "family": "decoder",
            "model": "LlamaConfig",
            "tokenizer": "byte-bpe",
            "model_kwargs": {**entry.model_kwargs, "hiden_size": 64},
        },
        3,
        0,
    )
    with pytest.raises(ConfigError) as err:
        architecture(bad)
    assert "extract.models[3].model_kwargs.hiden_size" in str(err.value)
    assert "hidden_size" in str(err.value)


def test_gpt2_attribute_names_are_config_fields():
    arch = architecture(tiny("gpt2", model_kwargs={"n_embd": 32, "n_layer": 2, "n_head": 2}))
    assert (arch.width, arch.depth) == (32, 2)
