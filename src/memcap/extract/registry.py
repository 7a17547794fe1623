"""Create a ViT (timm), BERT or GPT-2 (transformers) model from a config entry.

:func:`create_model` is the one place where models are built. Weights are ``random`` (the
library's own initialisation under the entry's seed), ``pretrained`` (the library's normal hub
loading, which honours the Hugging Face cache and ``HF_HUB_OFFLINE``), ``package:<module>`` (a
``save_pretrained`` directory shipped by a Python package) or a local path.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import torch
from torch import nn

from memcap.errors import ConfigError
from memcap.extract.config import CONFIG_CLASSES, PACKAGE_PREFIX, ModelEntry, resolve_package_path
from memcap.provenance import array_checksum

_logger = logging.getLogger(__name__)

_CHECKPOINT_FILES = ("model.safetensors", "pytorch_model.bin")


@dataclass
class LoadedModel:
    """A model in eval mode plus the sizes the extraction needs."""

    module: nn.Module  # the full model (timm VisionTransformer, BertModel or GPT2Model)
    family: str
    depth: int  # number of transformer blocks
    width: int  # d, the hidden size
    max_tokens: int  # vit: tokens per image; text: number of position embeddings
    model_id: str  # what was built: timm name, hub id / directory, or config class
    weights_source: str  # human-readable origin of the weights
    vocab_size: int | None = None  # text models only
    tokenizer_source: str | None = None  # where the model's own tokenizer lives, if anywhere
    data_config: dict[str, Any] | None = None  # timm preprocessing (vit only)
    warnings: list[str] = field(default_factory=list)


def create_model(entry: ModelEntry) -> LoadedModel:
    """Build the entry's model with its weights, in eval mode, on the CPU.

    Raises:
        ConfigError: unknown model name, wrong family, or weights that cannot be reached.
    """
    loaded = _create_vit(entry) if entry.family == "vit" else _create_text_model(entry)
    loaded.module.eval()
    _logger.info(
        "built %s (%s, %s): depth %d, width %d, %d tokens",
        entry.name,
        loaded.model_id,
        loaded.weights_source,
        loaded.depth,
        loaded.width,
        loaded.max_tokens,
    )
    return loaded


def parameter_checksum(module: nn.Module) -> str:
    """SHA-256 over every parameter and buffer, in ``state_dict`` order."""
    return array_checksum(
        t.detach().cpu().contiguous().numpy() for t in module.state_dict().values()
    )


def local_weights_path(entry: ModelEntry) -> Path | None:
    """The directory or file behind ``package:<module>`` / path weights; None otherwise."""
    if entry.weights in ("random", "pretrained"):
        return None
    if entry.weights.startswith(PACKAGE_PREFIX):
        return resolve_package_path(entry.weights)
    return Path(entry.weights)


def _create_vit(entry: ModelEntry) -> LoadedModel:
    import timm
    from timm.data import resolve_data_config
    from timm.models.vision_transformer import VisionTransformer

    if not timm.is_model(entry.model):
        raise ConfigError(
            f"{entry.key}.model",
            f"timm has no model '{entry.model}'",
            "use a ViT name from timm.list_models('vit_*'), e.g. vit_base_patch16_224",
        )
    kwargs = dict(entry.model_kwargs)
    local = local_weights_path(entry)
    if entry.weights == "random":
        torch.manual_seed(entry.seed)
        model = timm.create_model(entry.model, pretrained=False, **kwargs)
        source = f"random (timm init, seed {entry.seed})"
    elif entry.weights == "pretrained":
        try:
            model = timm.create_model(entry.model, pretrained=True, **kwargs)
        except OSError as err:
            raise _unreachable(entry, entry.model, err) from None
        source = "pretrained (timm / Hugging Face hub)"
    else:
        checkpoint = _checkpoint_file(entry, local)
        model = timm.create_model(
            entry.model, pretrained=False, checkpoint_path=checkpoint, **kwargs
        )
        source = f"local checkpoint {_describe(entry)}"
    if not isinstance(model, VisionTransformer):
        raise ConfigError(
            f"{entry.key}.model",
            f"'{entry.model}' is a {type(model).__name__}, not a timm VisionTransformer",
            "use a ViT model name (vit_*, deit_*)",
        )
    img_size = tuple(model.patch_embed.img_size)
    data_config = resolve_data_config({"input_size": (3, *img_size)}, model=model)
    return LoadedModel(
        module=model,
        family="vit",
        depth=len(model.blocks),
        width=model.embed_dim,
        max_tokens=model.num_prefix_tokens + model.patch_embed.num_patches,
        model_id=entry.model,
        weights_source=source,
        data_config=dict(data_config),
    )


def _checkpoint_file(entry: ModelEntry, path: Path) -> Path:
    """A timm checkpoint: the file itself, or a known weights file inside a directory."""
    if path.is_file():
        return path
    for name in _CHECKPOINT_FILES:
        if (path / name).is_file():
            return path / name
    raise ConfigError(
        f"{entry.key}.weights",
        f"no checkpoint file in '{path}' (looked for {', '.join(_CHECKPOINT_FILES)})",
        "point weights at a timm checkpoint file",
    )


def _create_text_model(entry: ModelEntry) -> LoadedModel:
    from transformers import AutoConfig, BertConfig, BertModel, GPT2Config, GPT2Model

    config_class, model_class = {
        "bert": (BertConfig, BertModel),
        "gpt2": (GPT2Config, GPT2Model),
    }[entry.family]
    kwargs = dict(entry.model_kwargs)
    local = local_weights_path(entry)
    is_architecture = entry.model == CONFIG_CLASSES[entry.family]
    origin = str(local) if local is not None else entry.model
    if local is not None and not (local / "config.json").is_file():
        raise ConfigError(
            f"{entry.key}.weights",
            f"'{local}' is not a save_pretrained directory (no config.json)",
            "point weights at the directory written by model.save_pretrained()",
        )
    if is_architecture and local is None:
        config = config_class(**kwargs)
    else:
        try:
            config = AutoConfig.from_pretrained(origin, **kwargs)
        except OSError as err:
            raise _unreachable(entry, origin, err) from None
    if config.model_type != entry.family:
        raise ConfigError(
            f"{entry.key}.model",
            f"'{origin}' is a {config.model_type} model, not {entry.family}",
            f"use a {entry.family} model id or change family",
        )
    warnings: list[str] = []
    if entry.weights == "random":
        torch.manual_seed(entry.seed)
        model = model_class(config)
        source = f"random (transformers init, seed {entry.seed})"
    else:
        try:
            model, info = model_class.from_pretrained(
                origin, config=config, output_loading_info=True
            )
        except OSError as err:
            raise _unreachable(entry, origin, err) from None
        missing = sorted(info.get("missing_keys", []))
        if missing:
            warnings.append(f"weights missing from the checkpoint, left random: {missing}")
        source = "pretrained (hub)" if local is None else f"pretrained from {_describe(entry)}"
    return LoadedModel(
        module=model,
        family=entry.family,
        depth=config.num_hidden_layers,
        width=config.hidden_size,
        max_tokens=config.max_position_embeddings,
        model_id=entry.model,
        weights_source=source,
        vocab_size=config.vocab_size,
        tokenizer_source=None if is_architecture and local is None else origin,
        warnings=warnings,
    )


def _describe(entry: ModelEntry) -> str:
    """Local weights as provenance: the path, or the package and its version."""
    if not entry.weights.startswith(PACKAGE_PREFIX):
        return entry.weights
    module = entry.weights.removeprefix(PACKAGE_PREFIX)
    distributions = metadata.packages_distributions().get(module, [module])
    return f"Python package {distributions[0]} {metadata.version(distributions[0])}"


def _unreachable(entry: ModelEntry, origin: str, err: OSError) -> ConfigError:
    """One-line error for weights that are neither cached nor downloadable."""
    _logger.debug("loading %s failed: %s", origin, err)
    cache = os.environ.get("HF_HOME", "~/.cache/huggingface")
    offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0", "false", "False")
    why = "HF_HUB_OFFLINE is set" if offline else "the hub is unreachable"
    return ConfigError(
        f"{entry.key}.weights",
        f"cannot load '{origin}' for model '{entry.name}': it is not in the Hugging Face cache "
        f"({cache}) and {why}",
        f"either (1) fetch it once where the hub is reachable (`hf download {origin}`, or run "
        "this job online) so it lands in the cache, or (2) set weights to a local "
        "save_pretrained directory or timm checkpoint file (or weights: random)",
    )
