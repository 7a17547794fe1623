"""Resolve ``layers: all`` (and open ranges) of models whose depth no file gives.

``entries.model_entry`` resolves every entry whose depth ``model_kwargs``, a config.json or a
GGUF header states. The rest (timm names, bare transformers config classes such as
``BertConfig``) need the architecture: built here on the meta device (timm) or from the
library's config, without weights: the config checks have resolved it already
(``architectures.py``: imports torch and timm / transformers, about 6-15 s of CPU on a
2-core machine, only where its cache lacks the entry).
"""

from __future__ import annotations

from memcap.extract.architectures import check_architecture
from memcap.extract.config import ModelEntry
from memcap.extract.entries import with_resolved
from memcap.extract.layer_spec import resolve_layers


def with_layers(entry: ModelEntry) -> ModelEntry:
    """``entry`` with explicit layers, building its architecture if the depth needs it."""
    if entry.layers_resolved:
        return entry
    depth = built_depth(entry)
    return with_resolved(entry, resolve_layers(entry.layer_spec, depth, f"{entry.key}.layers"))


def built_depth(entry: ModelEntry) -> int:
    """Number of blocks of the entry's architecture: as resolved by the config checks
    (``architectures.py``, kept between invocations), else built here (torch imported
    lazily)."""
    resolved = check_architecture(entry)
    if resolved is not None:
        return resolved.depth
    from memcap.extract.registry import architecture

    return architecture(entry).depth
