"""Which architectures the extraction reads, and the one sentence for those it refuses.

Read: stacks of global-attention blocks (ViT, DeiT, BEiT, EVA-02, BERT-like encoders, causal
decoders), class attention (CaiT: its class-attention layers; the self-attention ones below,
without a class token, are refused in the dry run: ``checks.class_attention_layers``), one
block shared across the depth (ALBERT), the encoder stack of an encoder-decoder (T5,
Flan-T5, BART, mBART: family ``encoder``; the decoder is never run) and
windowed attention (Swin: family ``vit``, :mod:`memcap.extract.windows`); where the blocks are,
:func:`memcap.extract.layers.block_layout`. A text model that states no number of positions
and no relative buckets (ALiBi: BLOOM, MPT; NoPE) has no position limit: its entry must set
``n``. Refused only where Theorem 1, about an attention layer reading a context of n tokens,
has no object: models without attention (ConvNeXt, MLP-Mixer, ResNet) and state-space or
recurrent models (Mamba, RWKV, xLSTM). Besides these, a config without the sizes the
extraction reads, an encoder-decoder named as a decoder or vision encoder, a model whose
blocks :func:`~memcap.extract.layers.block_layout` cannot find, and a timm attention model
that is neither ViT-style, nor CaiT-style, nor a Swin stop with what it does read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import nn

from memcap.extract.config import SUPPORTED

# transformers model types whose blocks mix tokens by a recurrence instead of attention.
STATE_SPACE = {
    "mamba": "Mamba",
    "mamba2": "Mamba-2",
    "falcon_mamba": "Falcon Mamba",
    "rwkv": "RWKV",
    "xlstm": "xLSTM",
}
NO_OBJECT = "so Theorem 1, about an attention layer reading a context of n tokens, has no object"
# The transformers config attributes the extraction reads, per family kind.
TEXT_FIELDS = ("num_hidden_layers", "hidden_size", "vocab_size")
VISION_FIELDS = ("num_hidden_layers", "hidden_size", "image_size", "patch_size")
# Where positions enter inside attention as buckets (T5): no table, so no position limit.
RELATIVE_FIELD = "relative_attention_num_buckets"
# A text config's number of positions (MPT: the length its ALiBi table is built for).
POSITION_FIELDS = ("max_position_embeddings", "n_positions", "max_seq_len")


@dataclass(frozen=True)
class Refusal:
    """Why the extraction does not read a model, and what to do."""

    problem: str
    fix: str


def _read_instead(kind: str) -> str:
    return f"remove the entry, or audit an attention model: as {kind} use {SUPPORTED[kind]}"


def no_attention(kind: str) -> Refusal:
    """The refusal of a model without attention."""
    return Refusal(
        f"has no attention layer (it mixes tokens by convolutions or MLPs), {NO_OBJECT}",
        _read_instead(kind),
    )


def has_attention(model: nn.Module) -> bool:
    """Whether any submodule is an attention layer (by class: ``*Attention*`` / ``*Attn*``)."""
    names = (type(m).__name__.lower() for m in model.modules())  # nn.MultiheadAttention too
    return any("attention" in name or "attn" in name for name in names)


def is_windowed_config(config: Any) -> bool:
    """Whether a transformers vision config attends within windows (Swin and its variants)."""
    vision = getattr(config, "vision_config", None) or config
    return getattr(vision, "window_size", None) is not None


def unreadable(kind: str, config: Any, build: Callable[[], nn.Module]) -> Refusal | None:
    """Why the extraction does not read a transformers model of this config as ``kind``
    (None: it does; a windowed config is read, its geometry from the built model).
    ``build`` gives the model on the meta device, to tell a vision model without attention
    from one whose config lacks sizes."""
    name = STATE_SPACE.get(getattr(config, "model_type", ""))
    if name is not None:
        return Refusal(
            f"is a state-space / recurrent model ({name}): its blocks mix tokens by a "
            f"recurrence, not attention, {NO_OBJECT}",
            _read_instead("decoder"),
        )
    if getattr(config, "is_encoder_decoder", False) and kind != "encoder":
        return Refusal(
            "is an encoder-decoder model: its encoder stack is audited as family encoder "
            "(the decoder is never run)",
            "set family: encoder",
        )
    if kind == "vit":
        if is_windowed_config(config):
            return None
        vision = getattr(config, "vision_config", None) or config
        missing = [f for f in VISION_FIELDS if getattr(vision, f, None) is None]
        if missing and not has_attention(build()):
            return no_attention(kind)
    else:
        text = config.get_text_config()
        missing = [f for f in TEXT_FIELDS if getattr(text, f, None) is None]
        if missing and no_position_limit(config):  # not a text model at all
            return Refusal(
                "states no number of positions (max_position_embeddings or n_positions) and "
                "no relative position buckets",
                f"as {kind} use {SUPPORTED[kind]}",
            )
    if missing:
        return Refusal(
            f"lacks the sizes the extraction reads ({', '.join(missing)})",
            f"as {kind} use {SUPPORTED[kind]}",
        )
    return None


def position_limit(config: Any) -> int | None:
    """The number of positions a text config states (None: it states none)."""
    text = config.get_text_config()
    for name in POSITION_FIELDS:
        value = getattr(text, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def no_position_limit(config: Any) -> bool:
    """Whether a text model's n is bounded by nothing but memory: it states no number of
    positions, and no relative buckets either (T5's, which take a default n): ALiBi, NoPE."""
    text = config.get_text_config()
    return position_limit(config) is None and not isinstance(
        getattr(text, RELATIVE_FIELD, None), int
    )


def unreadable_layout(model: nn.Module, kind: str, why: str) -> Refusal:
    """The refusal of a built model (meta device) whose blocks the extraction cannot find."""
    if not has_attention(model):
        return no_attention(kind)
    return Refusal(
        f"has attention, but the extraction cannot read its blocks ({why})",
        "remove the entry, or audit a model whose blocks form one list (BERT, GPT-2, Llama, "
        "ViT, ...) or one shared block (ALBERT)",
    )


def unreadable_module(model: nn.Module, kind: str) -> Refusal:
    """The refusal of a built model (meta device) that is neither ViT-style nor windowed."""
    if not has_attention(model):
        return no_attention(kind)
    if getattr(model, "blocks_token_only", None) is not None:
        return Refusal(
            "has no class-attention block (depth_token_only: 0): its self-attention blocks read "
            "the patches without a class token, so no layer has the class token as its query",
            "set depth_token_only >= 1 in model_kwargs (CaiT's class-attention layers are "
            "audited), or remove the entry",
        )
    return Refusal(
        "has attention, but neither in ViT-style global blocks nor in Swin windows: the "
        "extraction does not read its token layout",
        f"as {kind} use {SUPPORTED[kind]}",
    )
