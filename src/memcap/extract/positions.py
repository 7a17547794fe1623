"""How a model tells positions apart, and what that means for Assumption 2 at layer 0.

Torch-free: the extraction records :func:`position_encoding` in provenance (``positions``);
the assumptions and capacity stages read :func:`inside_attention` to name the mechanism.

* ``additive``: a position table (a parameter or buffer named as in ``POSITION_TABLES``) is
  added to the embeddings, so the residual stream carries position: ViT, BERT, GPT-2, BART.
* ``relative_bias``: positions enter inside attention, as a bias on the scores that depends on
  the distance between query and key (``RELATIVE_BIASES``; T5's buckets, Swin's table).
* ``rotary``: positions enter inside attention, as a rotation of queries and keys (Llama,
  Mistral, Qwen, SmolLM2: a rotary field of the transformers config, ``ROTARY_FIELDS``).
* ``alibi``: positions enter inside attention, as a bias on the scores linear in the distance
  between query and key (BLOOM, MPT, Falcon with ``alibi``): nothing bounds n but memory.
* ``none``: none of these (NoPE).

:func:`position_mechanism` names how positions enter for the report, in a few words, also where
an additive table sits beside a mechanism inside attention (EVA-02: absolute and rotary).

Without an additive table two equal input tokens (words, or identical image patches) have
equal embeddings: at layer 0 a context holding a token twice has a repeated row, so its rank
is below n and Assumption 2 fails on it by construction.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# Learned or fixed position tables added to the token / patch embeddings: timm's pos_embed;
# transformers' position_embedding(s) (ViT, DINOv2, CLIP, BERT), wpe (GPT-2) and
# embed_positions (OPT, BART, mBART, M2M100's sinusoidal buffer).
POSITION_TABLES = (
    "pos_embed",
    "position_embedding",
    "position_embeddings",
    "wpe",
    "embed_positions",
)
# Relative position biases inside attention: T5's relative_attention_bias (its buckets), the
# relative_position_bias_table of Swin and BEiT, Swin V2's continuous bias network cpb_mlp,
# DeBERTa's relative position embeddings rel_embeddings (disentangled attention).
RELATIVE_BIASES = (
    "relative_attention_bias",
    "relative_position_bias_table",
    "cpb_mlp",
    "rel_embeddings",
)
# transformers config fields of rotary-position models (rope_parameters since transformers 5).
ROTARY_FIELDS = ("rope_parameters", "rope_theta", "rotary_dim", "rotary_pct")
# Rotary embedding modules (timm EVA's rope, transformers' rotary_emb): their buffers are no
# table added to the residual stream, whatever they are called (timm's rope.pos_embed).
ROTARY_MODULES = ("rope", "rotary_emb", "rotary_pos_emb")
# transformers model types whose attention adds ALiBi biases (Falcon: its config's alibi flag).
ALIBI_TYPES = ("bloom", "mpt")
# The mechanism of each encoding that adds no position to the residual stream.
INSIDE_ATTENTION = {
    "relative_bias": "positions enter inside attention, as a relative bias",
    "rotary": "positions enter inside attention, as a rotation of queries and keys",
    "alibi": "positions enter inside attention, as a bias linear in the distance (ALiBi)",
    "none": "the model encodes no position",
}
# How positions enter, in a few words, for the report (position_mechanism in provenance).
MECHANISMS = {
    "additive": "absolute (a position table added to the embeddings)",
    "relative_bias": "relative position bias inside attention",
    "rotary": "rotary (queries and keys rotated inside attention)",
    "alibi": "ALiBi (a bias linear in the distance inside attention)",
    "none": "none (no position encoding)",
}
# The layers whose states are the embeddings without position: 0, and the random attention
# layer, which reads them (an attention layer maps equal rows to equal rows).
EMBEDDING_LAYERS = ("0", "random_attention")


def position_encoding(names: Iterable[str], config: Any) -> str:
    """``additive``, ``relative_bias``, ``rotary``, ``alibi`` or ``none`` of a model.

    Args:
        names: the dotted names of the model's parameters and buffers.
        config: its transformers config (None for timm models).
    """
    parts = _parts(names)
    if parts["table"]:
        return "additive"
    return _inside(parts, config)


def position_mechanism(names: Iterable[str], config: Any) -> str:
    """How positions enter, in a few words (:data:`MECHANISMS`): an additive table and a
    mechanism inside attention both where the model has both (EVA-02's absolute + rotary)."""
    parts = _parts(names)
    inside = _inside(parts, config)
    if parts["table"] and inside != "none":
        return f"{MECHANISMS['additive']} and {MECHANISMS[inside]}"
    return MECHANISMS["additive" if parts["table"] else inside]


def is_alibi(config: Any) -> bool:
    """Whether a transformers config's attention adds ALiBi biases (BLOOM, MPT, Falcon with
    ``alibi``)."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    attn = getattr(text, "attn_config", None)
    return bool(
        getattr(text, "model_type", None) in ALIBI_TYPES
        or getattr(text, "alibi", False)
        or getattr(attn, "alibi", False)
    )


def _parts(names: Iterable[str]) -> dict[str, bool]:
    """Whether the names hold an additive table, a relative bias, a rotary module."""
    split = [set(name.split(".")) for name in names]
    rotary = set(ROTARY_MODULES)
    return {
        "table": any(p & set(POSITION_TABLES) and not p & rotary for p in split),
        "relative": any(p & set(RELATIVE_BIASES) for p in split),
        "rotary": any(p & rotary for p in split),
    }


def _inside(parts: dict[str, bool], config: Any) -> str:
    """The mechanism inside attention: relative_bias, alibi, rotary or none."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    if parts["relative"] or getattr(text, "relative_attention_num_buckets", None):
        return "relative_bias"
    if config is not None and is_alibi(config):
        return "alibi"
    rotary = any(getattr(text, name, None) is not None for name in ROTARY_FIELDS)
    return "rotary" if rotary or parts["rotary"] else "none"


def inside_attention(positions: str | None) -> str | None:
    """The mechanism of an encoding that adds no position to the residual stream, in a few
    words (None for ``additive`` or an unrecorded one)."""
    return INSIDE_ATTENTION.get(positions or "additive")


def repeated_rows(positions: str | None, layer: str) -> str | None:
    """Why a context of this layer can repeat rows by construction (None: it cannot): the
    embeddings carry no position, so equal tokens give equal rows and rank < n."""
    why = inside_attention(positions)
    if why is None or str(layer) not in EMBEDDING_LAYERS:
        return None
    if positions != "none":
        why += ", and none is added to the residual stream"
    return (
        f"{why}, so at layer {layer} a token repeated in a context (a word, or an identical "
        "image patch) gives a repeated row and the context's rank falls below n"
    )


def repeat_cause(positions: str | None, layer: str) -> str | None:
    """:func:`repeated_rows` in a few words, for a table cell (None where it is None)."""
    if repeated_rows(positions, layer) is None:
        return None
    return f"{inside_attention(positions)}: a repeated token gives a repeated row at layer {layer}"
