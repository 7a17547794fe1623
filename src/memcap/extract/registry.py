"""Create any model of the ``extract.models`` config by family: the one place models are built.

Families: ``vit`` (a timm VisionTransformer or Swin by name, or a transformers vision encoder
such as ViTModel, Dinov2Model, SwinModel or CLIP's vision tower by hub id / directory / config
class), ``encoder`` and ``decoder`` (any transformers model through ``AutoModel``; an
encoder-decoder's encoder stack as ``encoder``; ``bert`` and ``gpt2`` are their aliases). What
is read and what refused: ``families.py``; weights routes: ``weights.py``. :func:`architecture`
gives the sizes without weights (a windowed model's per layer), so the job checks layers and n
before loading anything.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import torch
from torch import nn

from memcap.errors import ConfigError
from memcap.extract import _hf_models, _timm_models, families, positions
from memcap.extract.config import ModelEntry
from memcap.extract.layer_spec import Layer
from memcap.extract.layers import block_layout, blocks_needed
from memcap.extract.weights import weights_path
from memcap.extract.windows import WindowLayer, is_windowed, window_layers
from memcap.provenance import array_checksum

_logger = logging.getLogger(__name__)

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class Architecture:
    """Sizes of a model, known before its weights load."""

    library: str  # timm | transformers
    depth: int  # number of transformer blocks
    width: int  # d, the hidden size
    # vit: tokens per image (windowed: per window of layer 0); text: number of position
    # embeddings (None: no limit, positions enter as relative buckets, T5)
    max_tokens: int | None
    prefix_tokens: int = 1  # vit: class (+ register / distillation) tokens before the patches
    vocab_size: int | None = None  # text models only
    config: Any = None  # the transformers config (None for timm)
    H: int | None = None  # attention heads per block (None: the config states none)
    d_h: int | None = None  # the query/key dimension of one head
    windows: tuple[WindowLayer, ...] = ()  # windowed attention: layers 0 ... depth (Swin)
    shared_blocks: bool = False  # one block's parameters applied depth times (ALBERT)
    # no position limit and no default n (ALiBi, NoPE): the entry must set n
    n_required: bool = False
    # CaiT: its self-attention blocks before the class-attention ones; layers below this one
    # hold no class token and are refused (checks.class_attention_layers)
    class_attention: int | None = None

    def sizes(self, layer: Layer, n: int) -> tuple[int, int]:
        """(n, d) of a layer's contexts: the window's and stage's in a windowed model, else
        the job's n and the width (random_attention reads layer 0)."""
        if not self.windows:
            return n, self.width
        window = self.windows[blocks_needed(layer)]
        return window.n, window.width


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
    def max_tokens(self) -> int | None:
        """Tokens per image (vit) or position embeddings (text; None: no limit)."""
        return self.architecture.max_tokens

    @property
    def vocab_size(self) -> int | None:
        """Vocabulary size of a text model."""
        return self.architecture.vocab_size


def architecture(entry: ModelEntry, local_only: bool = False) -> Architecture:
    """The entry's sizes from its timm definition or transformers config, without weights
    (``local_only``: never from the network, only files and the Hugging Face cache).

    Raises:
        ConfigError: unknown model name or id, a model of the wrong family, or an
            architecture the extraction does not read (:mod:`memcap.extract.families`).
    """
    if entry.kind == "vit" and _timm_models.is_timm_model(entry):
        return _timm_architecture(entry)
    if entry.kind == "vit" and not _names_transformers_model(entry):
        raise ConfigError(
            f"{entry.key}.model",
            f"timm has no model '{entry.model}', and it is no hub id, directory or config class",
            "use a ViT or Swin name from timm.list_models('vit_*') / ('swin*'), e.g. "
            "vit_base_patch16_224, or a transformers vision encoder id such as "
            "google/vit-base-patch16-224-in21k",
        )
    config = _hf_models.hf_config(entry, local_only)
    refusal = families.unreadable(entry.kind, config, lambda: _hf_models.meta_model(config, entry))
    if refusal is not None:
        _refuse(entry, type(config).__name__, refusal)
    model = _hf_models.meta_model(config, entry)
    if entry.kind == "vit" and families.is_windowed_config(config):
        if not is_windowed(model):
            _refuse(entry, type(config).__name__, families.unreadable_module(model, "vit"))
        return _windowed(entry, "transformers", model, type(config).__name__, config)
    try:
        layout = block_layout(model)
    except ValueError as err:
        _refuse(
            entry, type(config).__name__, families.unreadable_layout(model, entry.kind, str(err))
        )
    if entry.kind == "vit":
        vision = getattr(config, "vision_config", None) or config
        patches = (int(vision.image_size) // int(vision.patch_size)) ** 2
        registers = int(getattr(vision, "num_register_tokens", 0) or 0)
        return Architecture(
            library="transformers",
            depth=vision.num_hidden_layers,
            width=vision.hidden_size,
            max_tokens=1 + registers + patches,
            prefix_tokens=1 + registers,
            config=config,
            H=attention_heads(vision),
            d_h=head_dimension(vision),
            shared_blocks=layout.shared,
        )
    text = config.get_text_config()
    return Architecture(
        library="transformers",
        depth=text.num_hidden_layers,
        width=text.hidden_size,
        max_tokens=families.position_limit(config),
        vocab_size=text.vocab_size,
        config=config,
        H=attention_heads(text),
        d_h=head_dimension(text),
        shared_blocks=layout.shared,
        n_required=families.no_position_limit(config),
    )


def _refuse(entry: ModelEntry, what: str, refusal: families.Refusal) -> NoReturn:
    raise ConfigError(
        f"{entry.key}.model", f"'{entry.model}' ({what}) {refusal.problem}", refusal.fix
    )


def _timm_architecture(entry: ModelEntry) -> Architecture:
    """A timm global-attention model's (ViT, DeiT, BEiT, EVA-02), class-attention model's
    (CaiT: its heads those of the class attention) or Swin's sizes, from the model on the meta
    device."""
    model = _timm_models.timm_architecture(entry)
    what = f"timm {type(model).__name__}"
    if is_windowed(model):
        return _windowed(entry, "timm", model, what)
    cait = _timm_models.is_class_attention(model)
    if not cait and not _timm_models.is_global_attention(model):
        _refuse(entry, what, families.unreadable_module(model, "vit"))
    try:
        layout = block_layout(model)
    except ValueError as err:
        _refuse(entry, what, families.unreadable_layout(model, "vit", str(err)))
    read = model.blocks_token_only if cait else model.blocks
    heads = _timm_models.head_sizes(read[0].attn) if len(read) else (None, None)
    prefix = 1 if cait else model.num_prefix_tokens  # CaiT: the class token of class attention
    return Architecture(
        library="timm",
        depth=layout.depth,
        width=model.embed_dim,
        max_tokens=prefix + model.patch_embed.num_patches,
        prefix_tokens=prefix,
        H=heads[0],
        d_h=heads[1],
        class_attention=layout.class_attention,
    )


def _windowed(
    entry: ModelEntry, library: str, model: nn.Module, what: str, config: Any = None
) -> Architecture:
    """A windowed model's sizes: its blocks, and layer 0's window and width."""
    try:
        layers = window_layers(model)
    except ValueError as err:
        raise ConfigError(
            f"{entry.key}.model_kwargs",
            f"'{entry.model}' ({what}): {err}, so window 0 would hold padding or wrap around",
            "choose an image size whose token grid at every stage is a multiple of the window",
        ) from None
    first = layers[0]
    return Architecture(
        library=library,
        depth=len(layers) - 1,
        width=first.width,
        max_tokens=first.n,
        prefix_tokens=0,
        config=config,
        H=first.H,
        d_h=first.d_h,
        windows=layers,
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
    """d_h of a transformers config: its ``head_dim`` (T5: ``d_kv``), else hidden size /
    heads."""
    for name in ("head_dim", "d_kv"):
        stated = getattr(config, name, None)
        if isinstance(stated, int):
            return stated
    H = attention_heads(config)
    return config.hidden_size // H if H else None


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
    """How the model tells positions apart (:func:`memcap.extract.positions.position_encoding`
    over its parameters and buffers)."""
    names = [name for name, _ in module.named_parameters()]
    names += [name for name, _ in module.named_buffers()]
    return positions.position_encoding(names, config)


def position_mechanism(module: nn.Module, config: Any) -> str:
    """How positions enter the model, in a few words
    (:func:`memcap.extract.positions.position_mechanism`)."""
    names = [name for name, _ in module.named_parameters()]
    names += [name for name, _ in module.named_buffers()]
    return positions.position_mechanism(names, config)


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
