"""The ``layers`` key of a model entry: parsed, checked and resolved to explicit layers.

Accepted shapes (torch-free, so the Snakefile parses them on every invocation)::

    layers: all                      # 0 (embeddings), 1, ..., depth
    layers: "0-6"                    # an inclusive range of blocks
    layers: [0, 1, random_attention] # a list of blocks, ranges, `all` and random_attention
    layers: {from: 0, to: null, every: 2, random_attention: true}

``every: k`` takes ``from``, ``from + k``, ... up to ``to`` (null: the depth) and always ends
with ``to`` itself, so the deepest requested block is never skipped. Only ``all`` and an open
``to`` need the model's depth; :func:`resolve_layers` gets it from the caller.
:func:`layer_name` and :func:`parse_layer` convert a layer to and from its ``{layer}`` wildcard.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memcap.errors import ConfigError

RANDOM_ATTENTION = "random_attention"
ALL = "all"
_RANGE = re.compile(r"^\s*(\d+)\s*-\s*(\d+)\s*$")
_OBJECT_KEYS = ("from", "to", "every", "random_attention")

Layer = int | str


def layer_name(layer: Layer) -> str:
    """The ``{layer}`` wildcard value of a layer: ``"0"``, ``"1"``, ..., ``"random_attention"``."""
    return str(layer)


def parse_layer(text: str) -> Layer:
    """Inverse of :func:`layer_name`."""
    return RANDOM_ATTENTION if text == RANDOM_ATTENTION else int(text)


@dataclass(frozen=True)
class BlockRange:
    """Blocks ``start``, ``start + step``, ... up to ``stop`` (None: the model's depth)."""

    start: int = 0
    stop: int | None = None
    step: int = 1


LayerItem = int | str | BlockRange  # a block, random_attention, or a range of blocks


@dataclass(frozen=True)
class LayerSpec:
    """The requested layers, in the order given, before the depth is known."""

    items: tuple[LayerItem, ...]

    @property
    def needs_depth(self) -> bool:
        """Whether resolving needs the model's depth (``all`` or an open range)."""
        return any(isinstance(item, BlockRange) and item.stop is None for item in self.items)


def parse_layer_spec(raw: Any, key: str) -> LayerSpec:
    """Parse a ``layers`` value; raise :class:`ConfigError` naming ``key`` if it is malformed."""
    if isinstance(raw, Mapping):
        return LayerSpec(_parse_object(raw, key))
    if isinstance(raw, str):
        return LayerSpec((_parse_item(raw, key),))
    if isinstance(raw, list | tuple):
        if not raw:
            raise ConfigError(key, "no layers requested", "list at least one layer, e.g. [0, 1]")
        return LayerSpec(tuple(_parse_item(item, key) for item in raw))
    raise ConfigError(
        key,
        f"{raw!r} is not a layer specification",
        "use all, a range such as '0-6', a list such as [0, 1, random_attention], or "
        "{from: 0, every: 2}",
    )


def resolve_layers(spec: LayerSpec, depth: int | None, key: str) -> tuple[Layer, ...]:
    """Explicit layers of ``spec`` for a model of ``depth`` blocks (None: unknown yet).

    Raises:
        ConfigError: a layer beyond the depth, an empty or reversed range, or a layer twice.
        ValueError: the spec needs the depth and ``depth`` is None.
    """
    layers: list[Layer] = []
    for item in spec.items:
        if isinstance(item, BlockRange):
            layers += _expand(item, depth, key)
        else:
            layers.append(item)
    seen: set[Layer] = set()
    for layer in layers:
        if layer in seen:
            raise ConfigError(key, f"duplicate layer {layer!r}", "request each layer once")
        seen.add(layer)
        if depth is not None and isinstance(layer, int) and layer > depth:
            raise ConfigError(
                key,
                f"layer {layer} is beyond the model's depth ({depth} blocks)",
                f"use layers between 0 and {depth}, or all",
            )
    return tuple(layers)


def _expand(item: BlockRange, depth: int | None, key: str) -> list[int]:
    stop = item.stop
    if stop is None:
        if depth is None:
            raise ValueError(f"{key}: resolving needs the model's depth")
        stop = depth
    if stop < item.start:
        raise ConfigError(
            key,
            f"the range {item.start}-{stop} is empty",
            "give the shallower block first, e.g. '0-6'",
        )
    blocks = list(range(item.start, stop + 1, item.step))
    return blocks if blocks[-1] == stop else [*blocks, stop]


def _parse_item(raw: Any, key: str) -> LayerItem:
    if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0:
        return raw
    if isinstance(raw, str):
        if raw in (RANDOM_ATTENTION, ALL):
            return raw if raw == RANDOM_ATTENTION else BlockRange()
        if raw.strip().isdigit():
            return int(raw)
        match = _RANGE.match(raw)
        if match:
            return BlockRange(int(match[1]), int(match[2]))
    raise ConfigError(
        key,
        f"layer {raw!r} is neither a block index >= 0, a range 'a-b', all, nor "
        f"'{RANDOM_ATTENTION}'",
        "use 0 (embeddings), k (output of block k), '0-6', all or random_attention",
    )


def _parse_object(raw: Mapping[str, Any], key: str) -> tuple[LayerItem, ...]:
    unknown = sorted(set(raw) - set(_OBJECT_KEYS))
    if unknown:
        raise ConfigError(
            f"{key}.{unknown[0]}", "unknown key", f"use only {', '.join(_OBJECT_KEYS)}"
        )
    values = {}
    for name, minimum in (("from", 0), ("to", 0), ("every", 1)):
        value = raw.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ConfigError(
                f"{key}.{name}", f"{value!r} is not an integer >= {minimum}", "fix the value"
            )
        values[name] = value
    attention = raw.get("random_attention", False)
    if not isinstance(attention, bool):
        raise ConfigError(f"{key}.random_attention", f"{attention!r} is not true/false", "fix it")
    blocks = BlockRange(values.get("from", 0), values.get("to"), values.get("every", 1))
    return (blocks, RANDOM_ATTENTION) if attention else (blocks,)


def resolve_detail(
    spec: LayerSpec, layers: tuple[Layer, ...], key: str, strict: bool
) -> tuple[Layer, ...]:
    """The detail layers of a model: those of ``spec`` among its extracted ``layers``.

    ``all`` and open ranges end at the deepest extracted block. A detail layer that is not
    extracted is dropped when ``strict`` is False (the default ``detail_layers``), else it is
    a :class:`ConfigError` naming ``key``.
    """
    deepest = max((layer for layer in layers if isinstance(layer, int)), default=0)
    items = tuple(
        BlockRange(item.start, deepest, item.step)
        if isinstance(item, BlockRange) and item.stop is None
        else item
        for item in spec.items
    )
    wanted = resolve_layers(LayerSpec(items), None, key)
    missing = [layer for layer in wanted if layer not in layers]
    if strict and missing:
        raise ConfigError(
            key,
            f"detail layer {missing[0]!r} is not among the model's layers",
            "add it to layers, or drop it from detail_layers",
        )
    return tuple(layer for layer in layers if layer in wanted)
