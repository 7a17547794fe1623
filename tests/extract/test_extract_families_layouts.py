"""Every family the extraction reads, end to end on a tiny random config: the dry run's checks
accept it, then its job extracts every requested layer, with no failure after the dry run.
Refused models stop in the dry run, naming the user's entry (index and name). ALBERT's shared
block is read at every application; BLOOM's ALiBi takes n from the config; BEiT and EVA-02
are read as ViT-style global attention, each naming how its positions enter; CaiT's
class-attention layers are read with the class token as the query, its self-attention ones
refused in the dry run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from memcap.errors import ConfigError
from memcap.extract.checks import check_extract_config
from memcap.extract.config import ExtractSettings
from memcap.extract.entries import model_entry
from memcap.extract.job import ExtractOutputs, extract_layers
from memcap.extract.layers import MultiLayerExtractor
from memcap.extract.registry import create_model

SETTINGS = ExtractSettings(batch_size=8, device="cpu")
LAYERS = [0, 1, 2, "random_attention"]
T = 8
TEXT_N = 16
SMALL = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "vocab_size": 600}
BERTISH = {**SMALL, "intermediate_size": 64, "max_position_embeddings": 64}
DECODER = {**SMALL, "intermediate_size": 64, "max_position_embeddings": 64}
VISION = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
          "intermediate_size": 64, "image_size": 32, "patch_size": 8}  # fmt: skip
TIMM = {"img_size": 32, "patch_size": 8, "embed_dim": 32, "depth": 2, "num_heads": 2}

# (family, model, model_kwargs, how positions enter: the provenance's position_mechanism)
TEXT_MODELS = {
    "roberta": ("encoder", "RobertaConfig", BERTISH, "absolute"),
    "distilbert": ("encoder", "DistilBertConfig",
                   {"dim": 32, "n_layers": 2, "n_heads": 2, "hidden_dim": 64, "vocab_size": 600,
                    "max_position_embeddings": 64}, "absolute"),
    "deberta-v3": ("encoder", "DebertaV2Config",
                   {**BERTISH, "relative_attention": True, "position_biased_input": False,
                    "pos_att_type": ["p2c", "c2p"]}, "relative"),
    "electra": ("encoder", "ElectraConfig", {**BERTISH, "embedding_size": 16}, "absolute"),
    "modernbert": ("encoder", "ModernBertConfig",
                   {**BERTISH, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
                    "cls_token_id": 1, "sep_token_id": 2}, "rotary"),
    "albert": ("encoder", "AlbertConfig", {**BERTISH, "embedding_size": 16}, "absolute"),
    "t5": ("encoder", "T5Config",
           {"d_model": 32, "d_ff": 64, "d_kv": 16, "num_layers": 2, "num_heads": 2,
            "vocab_size": 600}, "relative"),
    "bart": ("encoder", "BartConfig",
             {"d_model": 32, "encoder_layers": 2, "decoder_layers": 1,
              "encoder_attention_heads": 2, "decoder_attention_heads": 2, "encoder_ffn_dim": 64,
              "decoder_ffn_dim": 64, "max_position_embeddings": 64, "vocab_size": 600},
             "absolute"),
    "llama-gqa": ("decoder", "LlamaConfig",
                  {**DECODER, "num_attention_heads": 4, "num_key_value_heads": 2}, "rotary"),
    "mistral-window": ("decoder", "MistralConfig",
                       {**DECODER, "num_key_value_heads": 1, "sliding_window": 8}, "rotary"),
    "qwen2": ("decoder", "Qwen2Config", {**DECODER, "num_key_value_heads": 1}, "rotary"),
    "phi": ("decoder", "PhiConfig", DECODER, "rotary"),
    "gpt-neox": ("decoder", "GPTNeoXConfig", DECODER, "rotary"),
    "falcon": ("decoder", "FalconConfig", {**SMALL, "max_position_embeddings": 64}, "rotary"),
    "gemma": ("decoder", "GemmaConfig", {**DECODER, "head_dim": 16, "num_key_value_heads": 1},
              "rotary"),
    "opt": ("decoder", "OPTConfig",
            {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
             "ffn_dim": 64, "word_embed_proj_dim": 32, "max_position_embeddings": 64,
             "vocab_size": 600}, "absolute"),
    "bloom": ("decoder", "BloomConfig",
              {"hidden_size": 32, "n_layer": 2, "n_head": 2, "vocab_size": 600}, "ALiBi"),
    "mpt": ("decoder", "MptConfig",
            {"d_model": 32, "n_layers": 2, "n_heads": 2, "expansion_ratio": 2,
             "max_seq_len": 64, "vocab_size": 600}, "ALiBi"),
}  # fmt: skip
VISION_MODELS = {
    "hf-deit": ("DeiTConfig", VISION, "absolute"),
    "hf-dinov2-registers": ("Dinov2WithRegistersConfig",
                            {**{k: v for k, v in VISION.items() if k != "intermediate_size"},
                             "mlp_ratio": 2, "num_register_tokens": 2}, "absolute"),
    "hf-clip-vision": ("CLIPConfig", {"vision_config": VISION}, "absolute"),
    "hf-beit": ("BeitConfig", {**VISION, "use_relative_position_bias": True}, "relative"),
    "timm-vit": ("vit_tiny_patch16_224", TIMM, "absolute"),
    "timm-deit": ("deit_tiny_distilled_patch16_224", TIMM, "absolute"),
    "timm-beit": ("beit_base_patch16_224", TIMM, "relative"),
    "timm-eva02": ("eva02_tiny_patch14_224", {**TIMM, "img_size": 28, "patch_size": 7}, "rotary"),
    "timm-swin": ("swin_tiny_patch4_window7_224",
                  {"img_size": 32, "patch_size": 2, "window_size": 4, "embed_dim": 16,
                   "depths": [1, 1], "num_heads": [1, 2]}, "relative"),
}  # fmt: skip


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    """Each test resolves in its own cache directory (the user's is left alone)."""
    monkeypatch.setenv("MEMCAP_CACHE_DIR", str(tmp_path / "cache"))


def _text_raw(name: str) -> dict:
    family, model, kwargs, _ = TEXT_MODELS[name]
    return {"name": name, "family": family, "model": model, "model_kwargs": kwargs,
            "weights": "random", "tokenizer": "byte-bpe", "n": TEXT_N, "layers": LAYERS,
            "data": {"T": T, "source": "pydocs"}}  # fmt: skip


def _vision_raw(name: str) -> dict:
    model, kwargs, _ = VISION_MODELS[name]
    return {"name": name, "family": "vit", "model": model, "model_kwargs": kwargs,
            "weights": "random", "layers": LAYERS, "data": {"T": T}}  # fmt: skip


def _extract(raw: dict, folder: Path) -> dict:
    """The dry run's checks, then the job: {layer: (queries, contexts, provenance)}."""
    check_extract_config({"extract": {"models": [raw]}})
    entry = model_entry(raw, 0, 0)
    outputs = {layer: ExtractOutputs.in_folder(folder, str(layer)) for layer in entry.layers}
    for files in outputs.values():
        files.queries.parent.mkdir(parents=True)
    extract_layers(entry, outputs, SETTINGS)
    return {
        layer: (np.load(o.queries), np.load(o.contexts), json.loads(o.provenance.read_text()))
        for layer, o in outputs.items()
    }


def _check_layers(results: dict, mechanism: str) -> None:
    for layer, (queries, contexts, provenance) in results.items():
        assert queries.shape == (T, provenance["d"]), layer
        assert contexts.shape == (T, provenance["n"], provenance["d"]), layer
        assert np.isfinite(queries).all() and np.isfinite(contexts).all(), layer
        assert mechanism in provenance["position_mechanism"], layer
    q, contexts, provenance = results[1]
    index = provenance["query_index"]
    if provenance["window"] is None:  # the query is a row of its context
        assert np.array_equal(q, contexts[:, index])
    assert not np.array_equal(results[0][1], results[2][1]), "blocks ran"


@pytest.mark.parametrize("name", list(TEXT_MODELS))
def test_every_text_family_passes_the_dry_run_and_its_job(name, tmp_path):
    results = _extract(_text_raw(name), tmp_path)
    _check_layers(results, TEXT_MODELS[name][3])
    provenance = results[1][2]
    assert provenance["n"] == TEXT_N and provenance["depth"] == 2
    assert provenance["shared_weights"] == (name == "albert")


@pytest.mark.parametrize("name", list(VISION_MODELS))
def test_every_vision_family_passes_the_dry_run_and_its_job(name, tmp_path):
    results = _extract(_vision_raw(name), tmp_path)
    _check_layers(results, VISION_MODELS[name][2])


def _states(raw: dict, batch) -> tuple[torch.Tensor, ...]:
    entry = model_entry(raw, 0, 0)
    loaded = create_model(entry)
    with torch.inference_mode():
        states = MultiLayerExtractor(loaded.module, loaded.width, (0, 1, 2), 0)(batch)
    return loaded.module, tuple(states[layer] for layer in (0, 1, 2))


def test_albert_layer_k_is_the_kth_application_of_its_shared_block():
    raw = _text_raw("albert")
    ids = torch.randint(5, 600, (2, TEXT_N))
    model, ours = _states(raw, {"input_ids": ids})
    assert len(model.encoder.albert_layer_groups) == 1  # one block's parameters
    with torch.inference_mode():
        theirs = model(input_ids=ids, output_hidden_states=True).hidden_states
    assert len(theirs) == 3
    for layer in range(3):
        assert torch.equal(ours[layer], theirs[layer]), layer


@pytest.mark.parametrize("name", ["timm-beit", "timm-eva02"])
def test_a_timm_global_model_is_read_block_by_block(name):
    raw = _vision_raw(name)
    size = raw["model_kwargs"]["img_size"]
    images = torch.randn(2, 3, size, size)
    model, ours = _states(raw, images)
    with torch.inference_mode():
        final = model.forward_features(images)  # the final norm of the last block's output
        assert torch.allclose(model.norm(ours[2]), final, rtol=0, atol=0)
    assert ours[0].shape == (2, model.num_prefix_tokens + model.patch_embed.num_patches, 32)


def test_bloom_without_n_is_asked_for_it_in_the_dry_run():
    raw = {**_text_raw("bloom")}
    del raw["n"]
    with pytest.raises(ConfigError) as info:
        check_extract_config({"extract": {"models": [raw]}})
    assert info.value.key == "extract.models[0].n"
    assert "states no number of positions" in info.value.problem
    assert "ALiBi" in info.value.problem and "set n" in info.value.fix


def _refused(name: str) -> dict:
    """A model outside the families: MLP-Mixer."""
    return {"name": name, "family": "vit", "model": "mixer_s16_224", "weights": "random",
            "layers": [0], "data": {"T": T}}  # fmt: skip


@pytest.mark.parametrize("position", [0, 2])
def test_a_refusal_names_the_users_own_entry(position, tmp_path):
    others = [_vision_raw("timm-vit"), {**_vision_raw("timm-deit"), "name": "other"}]
    models = [*others[:position], _refused("my-mixer"), *others[position:]][: max(1, position + 1)]
    with pytest.raises(ConfigError) as info:
        check_extract_config({"extract": {"models": models}})
    assert info.value.key == f"extract.models[{position}].model"
    assert "model 'my-mixer'" in str(info.value) and "has no attention layer" in str(info.value)
    # the same model, resolved from the cache, at another index names that index
    with pytest.raises(ConfigError) as again:
        check_extract_config({"extract": {"models": [_refused("again")]}})
    assert again.value.key == "extract.models[0].model" and "model 'again'" in str(again.value)


# A tiny CaiT: 2 self-attention blocks, then 2 class-attention blocks (layers 2, 3, 4); its
# layer scale at 1, so a class-attention block moves the class token visibly.
CAIT = {"name": "my-cait", "family": "vit", "model": "cait_xxs24_224", "weights": "random",
        "model_kwargs": {"img_size": 32, "patch_size": 8, "embed_dim": 64, "depth": 2,
                         "num_heads": 4, "depth_token_only": 2, "init_values": 1.0},
        "layers": [2, 3, 4], "data": {"T": T}}  # fmt: skip
CAIT_N = 1 + (32 // 8) ** 2  # the class token and 16 patches


def test_cait_class_attention_layers_pass_the_dry_run_and_their_job(tmp_path):
    results = _extract(CAIT, tmp_path)
    assert set(results) == {2, 3, 4}
    for layer, (queries, contexts, provenance) in results.items():
        assert queries.shape == (T, 64) and contexts.shape == (T, CAIT_N, 64), layer
        assert np.isfinite(queries).all() and np.isfinite(contexts).all(), layer
        assert np.array_equal(queries, contexts[:, 0]), layer  # the class token's row
        assert provenance["query_index"] == 0 and provenance["prefix_tokens"] == 1
        assert (provenance["depth"], provenance["heads"], provenance["head_dim"]) == (4, 4, 16)
        assert "absolute" in provenance["position_mechanism"]
    first, later = results[2][1], results[4][1]
    assert np.allclose(first[:, 0], first[0, 0])  # layer 2: the learned class token, unread yet
    assert np.array_equal(first[:, 1:], later[:, 1:])  # the patches class attention reads
    assert not np.allclose(first[:, 0], later[:, 0])  # the class-attention blocks ran


@pytest.mark.parametrize(
    ("layers", "what"),
    [([2, 0], "layer 0 is the patch embeddings"),
     ([1, 3], "layer 1 is the patch tokens after self-attention block 1"),
     ([3, "random_attention"], "random_attention reads layer 0's embeddings"),
     ("all", "layer 0 is the patch embeddings")],
)  # fmt: skip
@pytest.mark.parametrize("position", [0, 1])
def test_cait_self_attention_layers_are_refused_in_the_dry_run(layers, what, position):
    models = [{**CAIT, "layers": layers}]
    if position:
        models = [_vision_raw("timm-vit"), *models, {**_vision_raw("timm-deit"), "name": "x"}]
    with pytest.raises(ConfigError) as info:
        check_extract_config({"extract": {"models": models}})
    assert info.value.key == f"extract.models[{position}].layers"
    assert "model 'my-cait'" in str(info.value)
    assert info.value.problem.startswith(f"model 'my-cait': {what}")
    assert "without a class token" in info.value.problem and "(CaiT)" in info.value.problem
    assert "2 to 4" in info.value.fix and "{from: 2}" in info.value.fix


def test_cait_other_queries_and_depths_are_refused_in_the_dry_run():
    with pytest.raises(ConfigError) as info:
        check_extract_config({"extract": {"models": [{**CAIT, "query_index": 3}]}})
    assert info.value.key == "extract.models[0].query_index"
    assert "class token, index 0" in info.value.problem
    with pytest.raises(ConfigError) as info:  # 2 + 2 blocks: no layer 5
        check_extract_config({"extract": {"models": [{**CAIT, "layers": [2, 5]}]}})
    assert info.value.key == "extract.models[0].layers" and "(4 blocks)" in info.value.problem
    assert model_entry({**CAIT, "layers": "all"}, 0, 0).layers == (0, 1, 2, 3, 4)
    kwargs = {k: v for k, v in CAIT["model_kwargs"].items() if k != "depth_token_only"}
    assert not model_entry({**CAIT, "layers": "all", "model_kwargs": kwargs}, 0, 0).layers
    # timm's default of 2 class-attention blocks: layer 4 is known once the model is built
    check_extract_config({"extract": {"models": [{**CAIT, "model_kwargs": kwargs}]}})


def test_cait_self_attention_layer_is_refused_by_the_job_before_weights(tmp_path):
    entry = model_entry({**CAIT, "layers": [1]}, 0, 0)
    outputs = {1: ExtractOutputs.in_folder(tmp_path, "1")}
    with pytest.raises(ConfigError) as info:
        extract_layers(entry, outputs, SETTINGS)
    assert info.value.key == "extract.models[0].layers" and "model 'my-cait'" in str(info.value)
    assert not outputs[1].queries.exists()


def test_cait_class_attention_output_is_timms_own():
    images = torch.randn(2, 3, 32, 32)
    entry = model_entry(CAIT, 0, 0)
    loaded = create_model(entry)
    model = loaded.module
    seen: dict[str, list[torch.Tensor]] = {"blocks": [], "class": []}
    hooks = [
        b.register_forward_hook(lambda m, a, out: seen["blocks"].append(out)) for b in model.blocks
    ]
    hooks += [b.register_forward_hook(lambda m, a, out: seen["class"].append(out))
              for b in model.blocks_token_only]  # fmt: skip
    with torch.inference_mode():
        final = model.forward_features(images)  # timm's own pass, through the final norm
    for hook in hooks:
        hook.remove()
    with torch.inference_mode():
        ours = MultiLayerExtractor(model, loaded.width, (2, 3, 4), 0)(images)
        normed = model.norm(ours[4])
    patches = seen["blocks"][-1]  # the patch tokens after the self-attention blocks
    expected = torch.cat((model.cls_token.expand(2, -1, -1), patches), dim=1)
    assert torch.equal(ours[2], expected)
    for k, cls in enumerate(seen["class"], start=1):  # class-attention block k's class token
        assert torch.allclose(ours[2 + k][:, :1], cls, rtol=1e-5, atol=1e-6), k
        assert torch.equal(ours[2 + k][:, 1:], patches), k
    assert torch.allclose(normed, final, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(ours[3][:, 0], ours[2][:, 0], atol=1e-3)
