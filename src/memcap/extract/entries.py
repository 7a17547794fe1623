"""Typed model entries built from the (schema-defaulted) ``extract`` config section.

Torch-free: the Snakefile builds every entry on each invocation. Layers are resolved here when
the spec is explicit or the depth is known from files (``sizes.known_depth``); the rest wait
for ``depth.with_layers``, which builds the architecture.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from memcap.errors import ConfigError
from memcap.extract.config import (
    DEFAULT_LAYERS,
    DEFAULT_SOURCES,
    FAMILY_KINDS,
    TEXT_ALIASES,
    DataConfig,
    ModelEntry,
    entry_error,
)
from memcap.extract.layer_spec import (
    Layer,
    LayerSpec,
    parse_layer_spec,
    resolve_detail,
    resolve_layers,
)
from memcap.extract.sizes import known_depth


def data_config(raw: Mapping[str, Any], global_seed: int, family: str = "vit") -> DataConfig:
    """Build a :class:`DataConfig` from a (schema-defaulted) ``data`` mapping.

    A null ``source`` is the family kind's offline default (``DEFAULT_SOURCES``); text's
    ``builtin`` is the alias of ``pydocs``.
    """
    seed = raw.get("seed")
    kind = FAMILY_KINDS.get(family, family)
    source = raw.get("source") or DEFAULT_SOURCES.get(kind, "builtin")
    if kind != "vit":
        source = TEXT_ALIASES.get(source, source)
    return DataConfig(
        source=source,
        T=int(raw.get("T", 800)),
        seed=global_seed if seed is None else int(seed),
        path=raw.get("path"),
        dataset=raw.get("dataset"),
        dataset_config=raw.get("dataset_config"),
        split=raw.get("split", "train"),
        column=raw.get("column"),
        max_chars=int(raw.get("max_chars", 2_000_000)),
        min_chars=int(raw.get("min_chars", 0)),
        crop_scale=tuple(raw.get("crop_scale", (0.25, 1.0))),
        mosaic=int(raw.get("mosaic", 2)),
        rgb_only=bool(raw.get("rgb_only", False)),
    )


def model_entry(raw: Mapping[str, Any], index: int, global_seed: int) -> ModelEntry:
    """Build a :class:`ModelEntry` from one (schema-defaulted) ``extract.models`` item.

    Its layers are resolved here when the spec is explicit or the depth is known from files
    (``model_kwargs``, config.json, GGUF header); otherwise they stay () until
    ``memcap.extract.depth.with_layers`` builds the architecture.

    Raises:
        ConfigError: a malformed ``layers`` or ``detail_layers`` value, a layer beyond a known
            depth, or a detail layer that is not extracted.
    """
    seed = raw.get("seed")
    spec = parse_layer_spec(
        raw.get("layers", list(DEFAULT_LAYERS)), f"extract.models[{index}].layers"
    )
    detail = parse_layer_spec(
        raw.get("detail_layers", list(DEFAULT_LAYERS)), f"extract.models[{index}].detail_layers"
    )
    entry = ModelEntry(
        index=index,
        name=raw["name"],
        family=raw["family"],
        model=raw["model"],
        weights=raw.get("weights", "random"),
        seed=global_seed if seed is None else int(seed),
        layers=(),
        layer_spec=spec,
        detail_spec=detail,
        data=data_config(raw.get("data", {}), global_seed, raw.get("family", "vit")),
        model_kwargs=dict(raw.get("model_kwargs", {})),
        n=raw.get("n"),
        query_index=raw.get("query_index"),
        tokenizer=raw.get("tokenizer"),
        bos=_bos(raw.get("bos", "auto")),
        gguf_file=raw.get("gguf_file"),
        precision=raw.get("precision", "float32"),
        device_map=raw.get("device_map"),
        trust_remote_code=bool(raw.get("trust_remote_code", False)),
        allow_pickle=bool(raw.get("allow_pickle", False)),
        description=raw.get("description"),
        stands_in_for=raw.get("stands_in_for"),
    )
    depth = known_depth(entry)
    if spec.needs_depth and depth is None:
        return entry
    return with_resolved(entry, resolve_layers(spec, depth, f"{entry.key}.layers"))


def _bos(value: bool | str) -> bool | None:
    """The ``bos`` key: True / False as given, None for ``auto``."""
    return None if value == "auto" else bool(value)


def with_resolved(entry: ModelEntry, layers: tuple[Layer, ...]) -> ModelEntry:
    """``entry`` with its explicit ``layers`` and the detail layers among them.

    Raises:
        ConfigError: an explicitly listed detail layer is not among ``layers`` (the default
            ``detail_layers`` is only intersected with them).
    """
    strict = entry.detail_spec != LayerSpec(DEFAULT_LAYERS)
    key = f"{entry.key}.detail_layers"
    detail = resolve_detail(entry.detail_spec, layers, key, strict)
    return replace(entry, layers=layers, detail_layers=detail)


def model_entries(config: Mapping[str, Any]) -> list[ModelEntry]:
    """Every entry of ``config["extract"]["models"]``, typed."""
    seed = int(config.get("seed", 0))
    raw_models = config.get("extract", {}).get("models", [])
    entries = []
    for index, raw in enumerate(raw_models):
        try:
            entries.append(model_entry(raw, index, seed))
        except ConfigError as err:
            raise entry_error(err, index, raw.get("name")) from None
    return entries
