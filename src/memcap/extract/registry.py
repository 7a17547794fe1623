"""Create any model of the ``extract.models`` config by family: the one place models are built.

Families: ``vit`` (a timm VisionTransformer by name, or a transformers vision encoder such as
ViTModel, Dinov2Model or CLIP's vision tower by hub id / directory / config class),
``encoder`` and ``decoder`` (any transformers model through ``AutoModel``; ``bert`` and
``gpt2`` are their aliases). Weights routes live in ``weights.py``. :func:`architecture`
gives the sizes without weights, so the job checks layers and n before loading anything.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from memcap.errors import ConfigError
from memcap.extract import _hf_models, _timm_models
from memcap.extract.config import SUPPORTED, ModelEntry
from memcap.extract.weights import weights_path
from memcap.provenance import array_checksum

_logger = logging.getLogger(__name__)

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# Parameter names of learned position tables added to the token / patch embeddings: timm's
# pos_embed; transformers' position_embedding(s) (ViT, DINOv2, CLIP, BERT), wpe (GPT-2) and
# embed_positions (OPT).
_POSITION_TABLES = (
    "pos_embed",
    "position_embedding",
    "position_embeddings",
    "wpe",
    "embed_positions",
)
# transformers config fields of rotary-position models (rope_parameters since transformers 5).
_ROTARY_FIELDS = ("rope_parameters", "rope_theta", "rotary_dim", "rotary_pct")


@dataclass(frozen=True)
class Architecture:
    """Sizes of a model, known before its weights load."""

    library: str  # timm | transformers
    depth: int  # number of transformer blocks
    width: int  # d, the hidden size
    max_tokens: int  # vit: tokens per image; text: number of position embeddings
    prefix_tokens: int = 1  # vit: class (+ register / distillation) tokens before the patches
    vocab_size: int | None = None  # text models only
    config: Any = None  # the transformers config (None for timm)
    heads: int | None = None  # attention heads per block (None: the config states none)
    head_dim: int | None = None  # d_h, the query/key dimension of one head


@dataclass
class LoadedModel:
    """A model in eval mode plus the sizes the extraction needs."""

    module: nn.Module  # the base model (timm VisionTransformer or transformers AutoModel)
    architecture: Architecture
    model_id: str  # what was built: timm name, hub id / directory, or config class
    weights_source: str  # human-readable origin of the weights
    tokenizer_source: str | None = None  # where the model's own tokenizer lives, if anywhere
    tokenizer_kwargs: dict[str, Any] = field(default_factory=dict)  # e.g. gguf_file
    token_types: bool = False  # encoder takes segment ids for sentence pairs
    data_config: dict[str, Any] | None = None  # timm-style preprocessing (vit only)
    warnings: list[str] = field(default_factory=list)

    @property
    def depth(self) -> int:
        """Number of transformer blocks."""
        return self.architecture.depth

    @property
    def width(self) -> int:
        """d, the hidden size."""
        return self.architecture.width

    @property
    def max_tokens(self) -> int:
        """Tokens per image (vit) or position embeddings (text)."""
        return self.architecture.max_tokens

    @property
    def vocab_size(self) -> int | None:
        """Vocabulary size of a text model."""
        return self.architecture.vocab_size


# The transformers config attributes the extraction reads, per family kind.
_TEXT_FIELDS = ("num_hidden_layers", "hidden_size", "vocab_size")
_VISION_FIELDS = ("num_hidden_layers", "hidden_size", "image_size", "patch_size")


def architecture(entry: ModelEntry, local_only: bool = False) -> Architecture:
    """The entry's sizes from its timm definition or transformers config, without weights
    (``local_only``: never from the network, only files and the Hugging Face cache).

    Raises:
        ConfigError: unknown model name or id, a model of the wrong family, or an
            architecture the extraction cannot read (:func:`unreadable`).
    """
    if entry.kind == "vit" and _timm_models.is_timm_model(entry):
        model = _timm_models.timm_architecture(entry)
        return Architecture(
            library="timm",
            depth=len(model.blocks),
            width=model.embed_dim,
            max_tokens=model.num_prefix_tokens + model.patch_embed.num_patches,
            prefix_tokens=model.num_prefix_tokens,
            heads=int(model.blocks[0].attn.num_heads) if len(model.blocks) else None,
            head_dim=int(model.blocks[0].attn.head_dim) if len(model.blocks) else None,
        )
    if entry.kind == "vit" and not _names_transformers_model(entry):
        raise ConfigError(
            f"{entry.key}.model",
            f"timm has no model '{entry.model}', and it is no hub id, directory or config class",
            "use a ViT name from timm.list_models('vit_*'), e.g. vit_base_patch16_224, or a "
            "transformers vision encoder id such as google/vit-base-patch16-224-in21k",
        )
    config = _hf_models.hf_config(entry, local_only)
    problem = unreadable(entry.kind, config)
    if problem is not None:
        raise ConfigError(
            f"{entry.key}.model",
            f"'{entry.model}' ({type(config).__name__}) {problem}",
            f"the extraction reads one stack of global-attention blocks; as {entry.family} "
            f"use {SUPPORTED[entry.kind]}",
        )
    text = config.get_text_config() if entry.kind != "vit" else None
    vision = getattr(config, "vision_config", None) or config
    if entry.kind == "vit":
        patches = (int(vision.image_size) // int(vision.patch_size)) ** 2
        registers = int(getattr(vision, "num_register_tokens", 0) or 0)
        return Architecture(
            library="transformers",
            depth=vision.num_hidden_layers,
            width=vision.hidden_size,
            max_tokens=1 + registers + patches,
            prefix_tokens=1 + registers,
            config=config,
            heads=attention_heads(vision),
            head_dim=head_dimension(vision),
        )
    positions = getattr(text, "max_position_embeddings", None) or text.n_positions
    return Architecture(
        library="transformers",
        depth=text.num_hidden_layers,
        width=text.hidden_size,
        max_tokens=int(positions),
        vocab_size=text.vocab_size,
        config=config,
        heads=attention_heads(text),
        head_dim=head_dimension(text),
    )


def attention_heads(config: Any) -> int | None:
    """Attention heads per block of a transformers config (query heads where key/value heads
    are grouped), or None when it states none."""
    for name in ("num_attention_heads", "n_head", "num_heads"):
        value = getattr(config, name, None)
        if isinstance(value, int):
            return value
    return None


def head_dimension(config: Any) -> int | None:
    """d_h of a transformers config: its ``head_dim``, else hidden size / heads."""
    stated = getattr(config, "head_dim", None)
    if isinstance(stated, int):
        return stated
    heads = attention_heads(config)
    return config.hidden_size // heads if heads else None


def unreadable(kind: str, config: Any) -> str | None:
    """Why the extraction cannot read a transformers model of this config as ``kind`` (None:
    it can): an encoder-decoder, windowed attention over hierarchical stages (Swin), or a
    config without the sizes the extraction reads."""
    if getattr(config, "is_encoder_decoder", False):
        return "is an encoder-decoder model (two stacks, the decoder cross-attending)"
    if kind == "vit":
        vision = getattr(config, "vision_config", None) or config
        if getattr(vision, "window_size", None) or isinstance(
            getattr(vision, "depths", None), list | tuple
        ):
            return "attends within windows over hierarchical stages that merge tokens"
        fields = _VISION_FIELDS
    else:
        vision = config.get_text_config()
        fields = _TEXT_FIELDS
        positions = ("max_position_embeddings", "n_positions")
        if not any(isinstance(getattr(vision, f, None), int) for f in positions):
            return "states no number of positions (max_position_embeddings or n_positions)"
    missing = [f for f in fields if getattr(vision, f, None) is None]
    if missing:
        return f"lacks the sizes the extraction reads ({', '.join(missing)})"
    return None


def _names_transformers_model(entry: ModelEntry) -> bool:
    """Whether a vit entry that timm does not know names a transformers model."""
    return entry.is_architecture or "/" in entry.model or weights_path(entry) is not None


def create_model(
    entry: ModelEntry,
    arch: Architecture | None = None,
    checkpoint: Path | None = None,
    device: torch.device | str = "cpu",
) -> LoadedModel:
    """Build the entry's model with its weights, in eval mode, in the entry's precision.

    Args:
        entry: the config entry.
        arch: its :func:`architecture`, if already computed.
        checkpoint: a converted checkpoint to load instead of the configured weights.
        device: where random weights are drawn (the job's device: a large model never
            passes through host memory); loaded weights arrive on the host.

    Raises:
        ConfigError: unknown model name, wrong family, or weights that cannot be reached.
    """
    arch = arch or architecture(entry)
    dtype, device = DTYPES[entry.precision], torch.device(device)
    loaded = LoadedModel(nn.Identity(), arch, model_id=entry.model, weights_source="")
    if arch.library == "timm":
        module, source = _timm_models.create_timm_model(entry, checkpoint, device)
        from timm.data import resolve_data_config

        img_size = tuple(module.patch_embed.img_size)
        settings = resolve_data_config({"input_size": (3, *img_size)}, model=module)
        loaded.data_config = dict(settings)
        loaded.module, loaded.weights_source = module.to(dtype), source
    else:
        module, source, warnings = _hf_models.create_hf_model(entry, arch.config, dtype, device)
        loaded.module, loaded.weights_source, loaded.warnings = module, source, warnings
        if entry.kind == "vit":
            loaded.data_config, fallback = _hf_models.image_data_config(entry, arch.config)
            loaded.warnings += [fallback] if fallback else []
        else:
            loaded.token_types = _hf_models.token_types(module)
            if not (entry.is_architecture and weights_path(entry) is None):
                origin, extra = _hf_models.load_origin(entry)
                loaded.tokenizer_source = origin
                loaded.tokenizer_kwargs = {k: v for k, v in extra.items() if v}
    loaded.module.eval()
    _logger.info(
        "built %s (%s, %s, %s): depth %d, width %d, %d tokens",
        entry.name,
        loaded.model_id,
        loaded.weights_source,
        entry.precision,
        loaded.depth,
        loaded.width,
        loaded.max_tokens,
    )
    return loaded


def position_encoding(module: nn.Module, config: Any) -> str:
    """How the model tells positions apart: ``additive``, ``rotary`` or ``none``.

    ``additive``: the model holds a learned position table (a parameter named as in
    ``_POSITION_TABLES``) that it adds to the embeddings, so the residual stream carries
    position - ViT, BERT, GPT-2. ``rotary``: no such table, and the transformers config has a
    rotary field (``_ROTARY_FIELDS``) and no ALiBi - Llama, Mistral, Qwen, SmolLM2: position
    enters the attention scores only. ``none``: neither (ALiBi, relative position biases).
    """
    names = (name.split(".") for name, _ in module.named_parameters())
    if any(part in _POSITION_TABLES for parts in names for part in parts):
        return "additive"
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    rotary = any(getattr(text, name, None) is not None for name in _ROTARY_FIELDS)
    return "rotary" if rotary and not getattr(text, "alibi", False) else "none"


def parameter_count(module: nn.Module) -> int:
    """Number of parameter values of the model."""
    return sum(p.numel() for p in module.parameters())


def parameter_checksum(module: nn.Module) -> str:
    """SHA-256 over every parameter and buffer (as float32), in ``state_dict`` order."""
    return array_checksum(_as_numpy(t) for t in module.state_dict().values())


def _as_numpy(tensor: torch.Tensor) -> Any:
    """A CPU NumPy copy; floating tensors as float32 (NumPy has no bfloat16)."""
    tensor = tensor.detach().cpu()
    return (tensor.float() if tensor.is_floating_point() else tensor).contiguous().numpy()
