"""A model's depth, positions and parameter count, known without loading weights.

Torch-free and cheap, so the Snakefile can check layers and n, and size memory requests,
before any job starts. Sources: ``model_kwargs`` where the user sets depth or positions, a
``config.json`` (local or package directory, or the Hugging Face cache for a hub id), a GGUF
header, a safetensors header. Anything else (timm names, config classes) is unknown here
(None) and checked at job start, before weights load.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from memcap.extract._gguf_header import read_gguf_header
from memcap.extract.config import FAMILY_KINDS, ModelEntry
from memcap.extract.weights import gguf_location, weights_path

# Depth / positions overrides that model_kwargs may carry, per family kind: they size the
# model before any job starts when the user gives them explicitly.
# (An encoder-decoder's encoder: T5's num_layers, BART's encoder_layers; a Swin's blocks: the
# sum of its stages' depths.)
_DEPTH_KEYS = {
    "vit": ("depth", "depths"),
    "encoder": ("num_hidden_layers", "num_layers", "encoder_layers"),
    "decoder": ("n_layer", "num_hidden_layers"),
}
_POSITION_KEYS = {
    "encoder": ("max_position_embeddings",),
    "decoder": ("n_positions", "max_position_embeddings"),
}
# timm CaiT: class-attention blocks after the ``depth`` self-attention ones (its models' names).
_TOKEN_ONLY = "depth_token_only"
_CLASS_ATTENTION_NAMES = ("cait",)
_DEPTH_FIELDS = ("depths", "encoder_layers", "num_hidden_layers", "n_layer", "num_layers")
_POSITION_FIELDS = ("max_position_embeddings", "n_positions")


@dataclass(frozen=True)
class ModelSizes:
    """What is known about a model before it is built (None: unknown)."""

    depth: int | None = None
    positions: int | None = None
    parameters: int | None = None


def known_sizes(entry: ModelEntry) -> ModelSizes:
    """Depth, positions and parameters of the entry's model, where files give them."""
    if entry.is_architecture or entry.weights == "random" and entry.kind == "vit":
        return ModelSizes()
    try:
        gguf = gguf_location(entry)
        if gguf is not None:
            return _gguf_sizes(str(Path(gguf[0]) / gguf[1]))
        path = weights_path(entry)
    except Exception:  # noqa: BLE001 - unknown here; the weights check reports it
        return ModelSizes()
    if path is None and Path(entry.model).expanduser().is_dir():  # a directory's architecture
        path = Path(entry.model).expanduser()
    elif path is None and "/" in entry.model:
        path = cached_config(entry.model)
    if path is None or not path.exists():
        return ModelSizes()
    if path.is_file() and path.suffix == ".safetensors":
        return ModelSizes(parameters=safetensors_parameters(path))
    config_file = path if path.name == "config.json" else path / "config.json"
    if not config_file.is_file():
        return ModelSizes()
    config = json.loads(config_file.read_text())
    config = {**config, **dict(entry.model_kwargs)}
    weights = config_file.parent / "model.safetensors"
    return ModelSizes(
        depth=_first(config, _DEPTH_FIELDS),
        positions=None if entry.kind == "vit" else _first(config, _POSITION_FIELDS),
        parameters=safetensors_parameters(weights) if weights.is_file() else None,
    )


def known_depth(entry: ModelEntry) -> int | None:
    """The entry's depth where ``model_kwargs`` or its files give it without building it.

    A timm CaiT's depth counts its class-attention blocks (``depth_token_only``) after its
    ``depth`` self-attention ones; where model_kwargs set ``depth`` but not
    ``depth_token_only`` it is unknown here (the dry run builds the architecture).
    """
    if entry.family not in FAMILY_KINDS:
        return None
    depth = _override(entry, _DEPTH_KEYS[entry.kind])
    if depth is not None and entry.kind == "vit":
        token_only = _override(entry, (_TOKEN_ONLY,))
        if token_only is not None:
            return depth + token_only
        if entry.model.lower().startswith(_CLASS_ATTENTION_NAMES):
            return None
    return depth or known_sizes(entry).depth


def known_positions(entry: ModelEntry) -> int | None:
    """The entry's number of positions where ``model_kwargs`` or its files give it."""
    positions = _override(entry, _POSITION_KEYS.get(entry.kind, ()))
    return known_sizes(entry).positions if positions is None else positions


def safetensors_parameters(path: Path) -> int:
    """Number of values in a safetensors file, from its JSON header."""
    with path.open("rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(length))
    total = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        count = 1
        for size in info["shape"]:
            count *= size
        total += count
    return total


@cache
def _gguf_sizes(path: str) -> ModelSizes:
    if not Path(path).is_file():
        return ModelSizes()
    metadata, shapes = read_gguf_header(path)
    arch = metadata.get("general.architecture")
    parameters = 0
    for shape in shapes.values():
        count = 1
        for size in shape:
            count *= size
        parameters += count
    return ModelSizes(
        depth=metadata.get(f"{arch}.block_count"),
        positions=metadata.get(f"{arch}.context_length"),
        parameters=parameters,
    )


def cached_config(model_id: str) -> Path | None:
    """The hub model's config.json if it is in the Hugging Face cache (never downloads)."""
    from huggingface_hub import try_to_load_from_cache
    from huggingface_hub.errors import HFValidationError

    try:
        found = try_to_load_from_cache(model_id, "config.json")
    except HFValidationError:  # not a hub id (a path that does not exist, say)
        return None
    return Path(found) if isinstance(found, str) else None


def _first(config: dict[str, Any], fields: tuple[str, ...]) -> int | None:
    for name in fields:
        size = _count(config.get(name))
        if size is not None:
            return size
    return None


def _count(value: Any) -> int | None:
    """A size: an integer, or the sum of a list of them (a Swin's blocks per stage)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, list | tuple) and value and all(isinstance(v, int) for v in value):
        return sum(value)
    return None


def _override(entry: ModelEntry, keys: tuple[str, ...]) -> int | None:
    """A size given explicitly in ``model_kwargs`` (e.g. ``depth``), if any."""
    return _first(dict(entry.model_kwargs), keys)
