"""Resolve ``layers: all`` (and open ranges) of models whose depth no file gives.

``entries.model_entry`` resolves every entry whose depth ``model_kwargs``, a config.json or a
GGUF header states. The rest (timm names, bare transformers config classes such as
``BertConfig``) need the architecture: built here on the meta device (timm) or from the
library's config, without weights. That imports torch and timm / transformers, about 6-15 s
of CPU on a 2-core machine, paid once per Snakemake invocation and only by configs that ask
for such a model's ``all``.
"""

from __future__ import annotations

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
    """Number of blocks of the entry's architecture (torch imported here, lazily)."""
    from memcap.extract.registry import architecture

    return architecture(entry).depth
