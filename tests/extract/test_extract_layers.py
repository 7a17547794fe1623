"""Truncated forwards equal the full models' hidden states; random attention layer."""

from __future__ import annotations

import pytest
import torch

from memcap.extract.layer_spec import RANDOM_ATTENTION
from memcap.extract.layers import (
    FINAL_NORMS,
    LayerExtractor,
    MultiLayerExtractor,
    RandomAttention,
    TruncatedForward,
    block_path,
    blocks_needed,
)

DEPTH = 3
# transformers models of every family: encoders, decoders, vision encoders.
HF_FAMILIES = ["bert", "roberta", "gpt2", "llama", "hf_vit", "hf_dinov2"]


@pytest.fixture(scope="module")
def vit():
    import timm

    torch.manual_seed(0)
    model = timm.create_model(
        "vit_base_patch16_224", img_size=32, patch_size=8, embed_dim=32, depth=DEPTH, num_heads=2
    )
    return model.eval(), torch.randn(3, 3, 32, 32)


@pytest.fixture(scope="module")
def bert():
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(
        hidden_size=32,
        num_hidden_layers=DEPTH,
        num_attention_heads=2,
        intermediate_size=64,
        vocab_size=100,
        max_position_embeddings=32,
    )
    ids = torch.randint(0, 100, (3, 12))
    types = torch.zeros_like(ids)
    types[:, 6:] = 1
    return BertModel(config).eval(), {"input_ids": ids, "token_type_ids": types}


@pytest.fixture(scope="module")
def gpt2():
    from transformers import GPT2Config, GPT2Model

    torch.manual_seed(0)
    config = GPT2Config(
        n_embd=32,
        n_layer=DEPTH,
        n_head=2,
        n_positions=32,
        vocab_size=100,
        bos_token_id=0,
        eos_token_id=0,
    )
    return GPT2Model(config).eval(), {"input_ids": torch.randint(0, 100, (3, 12))}


@pytest.fixture(scope="module")
def vit_registers():
    """A DINOv2-like timm ViT: patch 14, layer scale, a class token and 4 register tokens."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model(
        "vit_small_patch14_reg4_dinov2",
        img_size=28,
        embed_dim=32,
        depth=DEPTH,
        num_heads=2,
    )
    assert model.num_prefix_tokens == 5
    return model.eval(), torch.randn(3, 3, 28, 28)


@pytest.fixture(scope="module")
def llama():
    from transformers import LlamaConfig, LlamaModel

    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=DEPTH,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=100,
        max_position_embeddings=32,
    )
    return LlamaModel(config).eval(), {"input_ids": torch.randint(0, 100, (3, 12))}


@pytest.fixture(scope="module")
def roberta():
    from transformers import RobertaConfig, RobertaModel

    torch.manual_seed(0)
    config = RobertaConfig(
        hidden_size=32,
        num_hidden_layers=DEPTH,
        num_attention_heads=2,
        intermediate_size=64,
        vocab_size=100,
        max_position_embeddings=40,
        type_vocab_size=1,
    )
    return RobertaModel(config).eval(), {"input_ids": torch.randint(3, 100, (3, 12))}


@pytest.fixture(scope="module")
def hf_dinov2():
    from transformers import Dinov2Config, Dinov2Model

    torch.manual_seed(0)
    config = Dinov2Config(
        hidden_size=32,
        num_hidden_layers=DEPTH,
        num_attention_heads=2,
        mlp_ratio=2,
        image_size=28,
        patch_size=14,
    )
    return Dinov2Model(config).eval(), torch.randn(3, 3, 28, 28)


@pytest.fixture(scope="module")
def hf_vit():
    from transformers import ViTConfig, ViTModel

    torch.manual_seed(0)
    config = ViTConfig(
        hidden_size=32,
        num_hidden_layers=DEPTH,
        num_attention_heads=2,
        intermediate_size=64,
        image_size=32,
        patch_size=8,
    )
    return ViTModel(config, add_pooling_layer=False).eval(), torch.randn(3, 3, 32, 32)


def vit_reference(model, images) -> list[torch.Tensor]:
    """The full timm model's own states: the input of block 0, then every block's output."""
    states: list[torch.Tensor] = []
    model.blocks[0].register_forward_pre_hook(lambda _m, args: states.append(args[0]))
    for block in model.blocks:
        block.register_forward_hook(lambda _m, _a, out: states.append(out))
    with torch.no_grad():
        model.forward_features(images)
    for block in model.blocks:
        block._forward_hooks.clear()
        block._forward_pre_hooks.clear()
    return states


def hf_reference(model, batch) -> tuple[torch.Tensor, ...]:
    if not isinstance(batch, dict):
        batch = {"pixel_values": batch}
    with torch.no_grad():
        return model(**batch, output_hidden_states=True).hidden_states


@pytest.mark.parametrize("family", ["vit", "vit_registers"])
@pytest.mark.parametrize("depth", range(DEPTH + 1))
def test_vit_truncation_matches_full_model(family, depth, request):
    model, images = request.getfixturevalue(family)
    reference = vit_reference(model, images)
    with torch.no_grad():
        truncated = TruncatedForward(model, depth)(images)
    torch.testing.assert_close(truncated, reference[depth], rtol=1e-5, atol=1e-6)
    assert len(model.blocks) == DEPTH, "truncation must not change the original model"


def test_vit_block_outputs_match_forward_intermediates(vit):
    model, images = vit
    with torch.no_grad():
        own = model.forward_intermediates(
            images,
            indices=[0, 1],
            norm=False,
            output_fmt="NLC",
            intermediates_only=True,
            return_prefix_tokens=True,
        )
        for depth, (patches, prefix) in zip((1, 2), own, strict=True):
            ours = TruncatedForward(model, depth)(images)
            torch.testing.assert_close(ours, torch.cat([prefix, patches], dim=1))


@pytest.mark.parametrize("family", HF_FAMILIES)
@pytest.mark.parametrize("depth", range(DEPTH))
def test_text_truncation_matches_hidden_states(family, depth, request):
    model, batch = request.getfixturevalue(family)
    reference = hf_reference(model, batch)
    with torch.no_grad():
        truncated = TruncatedForward(model, depth)(batch)
    torch.testing.assert_close(truncated, reference[depth], rtol=1e-5, atol=1e-6)


def test_text_truncation_leaves_model_whole(bert, gpt2):
    TruncatedForward(bert[0], 1)
    TruncatedForward(gpt2[0], 1)
    assert len(bert[0].encoder.layer) == DEPTH and bert[0].pooler is not None
    assert len(gpt2[0].h) == DEPTH and isinstance(gpt2[0].ln_f, torch.nn.LayerNorm)


def test_gpt2_last_layer_is_the_raw_block_output(gpt2):
    """hidden_states[L] of GPT-2 has ln_f applied; layer L is the block output before it."""
    model, batch = gpt2
    reference = hf_reference(model, batch)
    with torch.no_grad():
        ours = TruncatedForward(model, DEPTH)(batch)
        torch.testing.assert_close(model.ln_f(ours), reference[DEPTH], rtol=1e-5, atol=1e-6)


def test_random_attention_matches_its_definition():
    torch.manual_seed(1)
    x = torch.randn(2, 5, 8)
    layer = RandomAttention(8, seed=3)
    assert not list(layer.norm.parameters()), "the LayerNorm has no affine parameters"
    z = torch.nn.functional.layer_norm(x, (8,))
    attn = layer.attention
    wq, wk, wv = attn.in_proj_weight.chunk(3)
    bq, bk, bv = attn.in_proj_bias.chunk(3)
    scores = (z @ wq.T + bq) @ (z @ wk.T + bk).transpose(1, 2) / 8**0.5  # (B, n, n)
    mixed = torch.softmax(scores, dim=-1) @ (z @ wv.T + bv)
    expected = z + attn.out_proj(mixed)
    with torch.no_grad():
        torch.testing.assert_close(layer(x), expected, rtol=1e-5, atol=1e-6)


def test_random_attention_is_seeded():
    x = torch.randn(2, 5, 8)
    with torch.no_grad():
        same = RandomAttention(8, seed=3)(x), RandomAttention(8, seed=3)(x)
        other = RandomAttention(8, seed=4)(x)
    torch.testing.assert_close(*same, rtol=0, atol=0)
    assert not torch.allclose(same[0], other)


@pytest.mark.parametrize("family", ["vit", "vit_registers", *HF_FAMILIES])
def test_random_attention_reads_layer_zero(family, request):
    model, batch = request.getfixturevalue(family)
    extractor = LayerExtractor(model, 32, RANDOM_ATTENTION, seed=0)
    with torch.no_grad():
        embeddings = TruncatedForward(model, 0)(batch)
        torch.testing.assert_close(extractor(batch), RandomAttention(32, seed=0)(embeddings))
    assert blocks_needed(RANDOM_ATTENTION) == 0 and blocks_needed(2) == 2


@pytest.mark.parametrize("family", HF_FAMILIES)
def test_last_layer_is_the_raw_block_output(family, request):
    """Layer L is the last block's output; the model's own last state may add a final norm."""
    model, batch = request.getfixturevalue(family)
    truncated = TruncatedForward(model, DEPTH)
    if not isinstance(batch, dict):
        batch = {"pixel_values": batch}
    with torch.no_grad():
        ours = truncated(batch)
        own = model(**batch, output_hidden_states=True)
    final = [getattr(model, name) for name in FINAL_NORMS if hasattr(model, name)]
    expected = final[0](ours) if final else ours
    torch.testing.assert_close(expected, own.last_hidden_state, rtol=1e-5, atol=1e-5)


def test_block_path_finds_every_family(bert, roberta, gpt2, llama, hf_vit, vit_registers):
    paths = [block_path(m[0]) for m in (bert, roberta, gpt2, llama, hf_vit, vit_registers)]
    assert paths == ["encoder.layer", "encoder.layer", "h", "layers", "layers", "blocks"]
    with pytest.raises(ValueError, match="no list of"):
        block_path(torch.nn.Linear(2, 2))


@pytest.mark.parametrize("family", ["vit", "vit_registers", *HF_FAMILIES])
@pytest.mark.parametrize(
    "layers",
    [
        tuple(range(DEPTH + 1)) + (RANDOM_ATTENTION,),
        (2, 0),
        (RANDOM_ATTENTION, 1),
        (0, RANDOM_ATTENTION),
    ],
)
def test_one_pass_equals_per_layer_truncated_forwards(family, layers, request):
    model, batch = request.getfixturevalue(family)
    with torch.no_grad():
        one_pass = MultiLayerExtractor(model, 32, layers, seed=3)(batch)
        assert tuple(one_pass) == layers
        for layer in layers:
            alone = LayerExtractor(model, 32, layer, seed=3)(batch)
            torch.testing.assert_close(one_pass[layer], alone, rtol=1e-5, atol=1e-6)
