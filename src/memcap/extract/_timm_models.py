"""timm models: VisionTransformers (ViT, DeiT, DINOv2 with or without register tokens), the
other global-attention models over a class token and patches (BEiT: a relative position bias
inside attention; EVA-02: rotary queries and keys), class attention (CaiT: the class token
reads the patches after the self-attention blocks) and Swin Transformers (windowed
attention)."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import torch

from memcap.errors import ConfigError
from memcap.extract._hf_models import unreachable
from memcap.extract.config import ModelEntry
from memcap.extract.weights import weights_path, weights_route

_CHECKPOINT_FILES = ("model.safetensors", "pytorch_model.bin")


def is_timm_model(entry: ModelEntry) -> bool:
    """Whether a vit entry names a timm model (else a transformers vision encoder)."""
    import timm

    return timm.is_model(entry.model)


def is_global_attention(model: Any) -> bool:
    """Whether a timm model is ViT-style: one stack of global-attention blocks over its prefix
    (class, register) tokens and patches, which its ``forward_features`` runs in order (ViT,
    DeiT, BEiT, EVA-02); not windowed (Swin) and not class attention (CaiT)."""
    from timm.models.vision_transformer import VisionTransformer

    if isinstance(model, VisionTransformer):
        return True
    blocks = getattr(model, "blocks", None)
    return (
        isinstance(blocks, torch.nn.ModuleList | torch.nn.Sequential)
        and len(blocks) > 0
        and getattr(model, "blocks_token_only", None) is None
        and isinstance(getattr(model, "num_prefix_tokens", None), int)
        and hasattr(getattr(model, "patch_embed", None), "num_patches")
        and isinstance(getattr(model, "embed_dim", None), int)
        and hasattr(blocks[0], "attn")
        and isinstance(getattr(blocks[0].attn, "num_heads", None), int)
    )


def is_class_attention(model: Any) -> bool:
    """Whether a timm model is CaiT-style: self-attention ``blocks`` over the patches, then
    class-attention ``blocks_token_only`` whose one query is a class token."""
    token_only = getattr(model, "blocks_token_only", None)
    return (
        isinstance(token_only, torch.nn.ModuleList | torch.nn.Sequential)
        and len(token_only) > 0
        and getattr(model, "cls_token", None) is not None
        and hasattr(getattr(model, "patch_embed", None), "num_patches")
        and isinstance(getattr(model, "embed_dim", None), int)
        and isinstance(getattr(token_only[0].attn, "num_heads", None), int)
    )


def head_sizes(attn: Any) -> tuple[int | None, int | None]:
    """(heads, d_h) of a timm attention module: its ``head_dim``, else its query projection's
    width over the heads."""
    H = getattr(attn, "num_heads", None)
    if not isinstance(H, int):
        return None, None
    d_h = getattr(attn, "head_dim", None)
    if isinstance(d_h, int):
        return H, d_h
    qkv, q = getattr(attn, "qkv", None), getattr(attn, "q_proj", None) or getattr(attn, "q", None)
    if qkv is not None:
        return H, qkv.weight.shape[0] // 3 // H
    return H, (q.weight.shape[0] // H if q is not None else None)


def timm_architecture(entry: ModelEntry) -> Any:
    """The entry's timm model on the meta device: sizes without weights or init."""
    import timm

    with torch.device("meta"):
        return timm.create_model(entry.model, pretrained=False, **entry.model_kwargs)


def create_timm_model(
    entry: ModelEntry, checkpoint: Path | None, device: torch.device
) -> tuple[Any, str]:
    """(the timm model with its weights, weights description).

    Args:
        entry: the config entry.
        checkpoint: the file to load instead of the configured weights (a converted ONNX).
        device: where random weights are drawn (in float32: timm's initialisers want it;
            the largest ViTs hold about 2.5 GB of them); loaded weights stay on the host.
    """
    import timm

    route = "local" if checkpoint is not None else weights_route(entry)
    kwargs = dict(entry.model_kwargs)
    if route == "random":
        torch.manual_seed(entry.seed)
        with torch.device(device):
            model = timm.create_model(entry.model, **kwargs)
        return model, f"random (timm init, seed {entry.seed}, drawn on {device.type})"
    if route == "pretrained":
        try:
            model = timm.create_model(entry.model, pretrained=True, **kwargs)
        except OSError as err:
            raise unreachable(entry, entry.model, err) from None
        return model, "pretrained (timm / Hugging Face hub)"
    path = checkpoint or checkpoint_file(entry, weights_path(entry))
    model = timm.create_model(entry.model, **kwargs)
    model.load_state_dict(_read_state_dict(entry, path), strict=True)
    return model, f"local checkpoint {path}"


def checkpoint_file(entry: ModelEntry, path: Path) -> Path:
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


def _read_state_dict(entry: ModelEntry, path: Path) -> dict[str, torch.Tensor]:
    """Safetensors, or a torch checkpoint with ``weights_only`` unless ``allow_pickle``."""
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path))
    try:
        state = torch.load(path, map_location="cpu", weights_only=not entry.allow_pickle)
    except pickle.UnpicklingError as err:
        raise ConfigError(
            f"{entry.key}.allow_pickle",
            f"'{path}' holds Python objects besides tensors ({str(err).splitlines()[0]})",
            "convert it to safetensors, or set allow_pickle: true for this model if you trust "
            "the file (it allows torch.load with weights_only=False, which can run code)",
        ) from None
    return state.get("state_dict", state) if isinstance(state, dict) else state
