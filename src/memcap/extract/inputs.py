"""An extraction job's inputs, settled before any forward: the context size n, the checks
that need the model's sizes, and the planned batches with what the provenance says of them.

Every data-size check (tokenizer vocabulary, corpus size, image plan) fires in
:func:`prepare_inputs`, before the first batch runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from memcap.errors import ConfigError
from memcap.extract.audit import image_audit, text_audit
from memcap.extract.checks import class_attention_layers, n_required, windowed_n
from memcap.extract.config import ModelEntry
from memcap.extract.corpus import load_documents
from memcap.extract.images import (
    ImageSource,
    PlannedInput,
    builtin_photographs,
    datasets_images,
    describe_input,
    describe_plan,
    image_batches,
    plan_inputs,
    regions,
)
from memcap.extract.layer_spec import RANDOM_ATTENTION, Layer
from memcap.extract.registry import Architecture, LoadedModel
from memcap.extract.text import (
    PAIR,
    TextTokenizer,
    document_tokens,
    document_windows,
    resolve_tokenizer,
    text_batches,
    text_inputs,
    use_bos,
    window_labels,
    window_length,
)

DEFAULT_TEXT_N = 128  # text context size when n is not set (capped by d and the positions)
TOKENS_HEAD = 4  # leading token ids per text example kept in provenance


@dataclass
class PreparedInputs:
    """Batches to feed the model, plus what the provenance says about them."""

    batches: Iterator[Any]
    description: str
    details: dict[str, Any]
    warnings: list[str]


def resolve_n(entry: ModelEntry, arch: Architecture) -> int:
    """Context size: configured, or all tokens incl. prefix / register tokens (vit; a windowed
    model: layer 0's window, each layer's own in :meth:`Architecture.sizes`) or
    min(128, d, positions) (text).

    Raises:
        ConfigError: ``n`` set for a windowed model (its contexts are whole windows).
    """
    if arch.windows and entry.n is not None:
        raise windowed_n(entry, arch.windows[0].n)
    if entry.n is not None:
        return entry.n
    if arch.n_required:
        raise n_required(entry)
    if entry.kind == "vit":
        return int(arch.max_tokens or 0)
    return min(DEFAULT_TEXT_N, arch.width, arch.max_tokens or DEFAULT_TEXT_N)


def check_against_model(entry: ModelEntry, layer: Layer, n: int, arch: Architecture) -> None:
    """Checks that need the model's sizes; raise :class:`ConfigError` before weights load."""
    if layer != RANDOM_ATTENTION and int(layer) > arch.depth:
        raise ConfigError(
            f"{entry.key}.layers",
            f"layer {layer} is beyond the depth of '{entry.model}' ({arch.depth} blocks)",
            f"use layers between 0 and {arch.depth}",
        )
    if arch.class_attention is not None:
        error = class_attention_layers(entry, (layer,), arch.class_attention, arch.depth)
        if error is not None:
            raise error
    if arch.max_tokens is not None and n > arch.max_tokens:
        what = "tokens per image" if entry.kind == "vit" else "positions"
        raise ConfigError(
            f"{entry.key}.n",
            f"n = {n} exceeds the model's {arch.max_tokens} {what}",
            f"use n <= {arch.max_tokens}",
        )
    q, (n, _) = entry.resolved_query_index, arch.sizes(layer, n)
    if not -n <= q < n:
        raise ConfigError(
            f"{entry.key}.query_index",
            f"query index {q} is outside a context of n = {n} tokens (layer {layer})",
            f"use an index in [{-n}, {n - 1}]",
        )


def prepare_inputs(
    entry: ModelEntry, loaded: LoadedModel, n: int, batch_size: int
) -> PreparedInputs:
    """Load the data and plan the T inputs; every data-size check fires here."""
    data = entry.data
    if entry.kind == "vit":
        from timm.data import create_transform

        source = (
            builtin_photographs() if data.source == "builtin" else datasets_images(data, entry.key)
        )
        plan = plan_inputs(
            len(source), source.size, data.T, data.seed, data.crop_scale, data.mosaic
        )
        crops = sum(region.box is not None for item in plan for region in regions(item))
        warnings = []
        if crops:
            made = f"{data.mosaic} x {data.mosaic} mosaics of " if data.mosaic > 1 else ""
            warnings.append(
                f"the {data.T} images are {made}random-resized crops and flips of only "
                f"{len(source)} distinct photographs"
            )
        transform = create_transform(**loaded.data_config)
        warnings += _skipped_warning(source.skipped, "images")
        details: dict[str, Any] = {"source_images": list(source.names), "crops": crops}
        details["mosaic"] = data.mosaic if crops and data.mosaic > 1 else 1
        details |= {
            "bos_token_id": None,
            "bos_prepended": False,
            "example_inputs": [describe_input(item, source.names) for item in plan],
            "example_tokens_head": None,
        }
        return PreparedInputs(
            batches=_audited_images(source, plan, transform, batch_size, details),
            description=f"{source.description}; {describe_plan(plan, data.crop_scale)}",
            details=details,
            warnings=warnings,
        )
    documents = load_documents(data, entry.key)
    tokenizer = resolve_tokenizer(
        entry, loaded.tokenizer_source, loaded.vocab_size, documents, loaded.tokenizer_kwargs
    )
    if tokenizer.vocab_size > loaded.vocab_size:
        raise ConfigError(
            f"{entry.key}.tokenizer",
            f"{tokenizer.description} has {tokenizer.vocab_size} tokens but the model only "
            f"{loaded.vocab_size}",
            "use a tokenizer whose vocabulary fits the model's",
        )
    if entry.kind == "encoder" and tokenizer.encoder_format is None:
        raise ConfigError(
            f"{entry.key}.tokenizer",
            "the tokenizer has neither [CLS] and [SEP] tokens nor an end-of-sequence token",
            "use another",
        )
    bos = use_bos(entry, tokenizer, n)
    length = window_length(entry.family, n, bos, tokenizer.encoder_format or PAIR)
    count, tokens_of = document_tokens(documents, tokenizer, length)
    try:
        windows = document_windows(count, tokens_of, length, data.T, data.seed)
    except ValueError as err:
        unreadable = f"; files skipped: {', '.join(documents.skipped)}"
        raise ConfigError(
            f"{entry.key}.data.T",
            f"the corpus is too small for T = {data.T} distinct windows of n = {n} tokens ({err})"
            + (unreadable if documents.skipped else ""),
            "lower T or n, or use a larger text source (no two examples may share text)",
        ) from None
    inputs = text_inputs(windows.tokens, entry.kind, tokenizer, bos)
    if not loaded.token_types:
        inputs.pop("token_type_ids", None)  # e.g. RoBERTa: one segment embedding only
    warnings = _skipped_warning(documents.skipped, "text files")
    if tokenizer.substitute:
        warnings.append(f"tokenizer substitute: {tokenizer.substitute}")
    return PreparedInputs(
        batches=text_batches(inputs, batch_size),
        description=documents.description,
        details={
            "corpus_chars": documents.chars,
            "corpus_documents": len(documents.texts),
            "corpus_sha256": documents.sha256,
            "documents_visited": windows.visited,
            "usable_documents_visited": windows.usable,
            "input_audit": text_audit(
                windows.tokens, windows.documents, windows.offsets, documents.stream
            ),
            "tokenizer": tokenizer.description,
            "input_format": _text_format(entry, tokenizer, bos),
            "tokenizer_substitute": tokenizer.substitute,
            "bos_token_id": tokenizer.bos_id,
            "bos_prepended": bos,
            "example_inputs": window_labels(windows, documents),
            "example_tokens_head": inputs["input_ids"][:, :TOKENS_HEAD].tolist(),
        },
        warnings=warnings,
    )


def _text_format(entry: ModelEntry, tokenizer: TextTokenizer, bos: bool) -> str:
    """How each text example is built from its window, for provenance."""
    if entry.kind == "encoder":
        return str(tokenizer.encoder_format)
    return "BOS token + window" if bos else "window"


def _skipped_warning(skipped: tuple[str, ...], what: str) -> list[str]:
    """The provenance warning for inputs left out, each with why (none: no warning)."""
    return [f"skipped {len(skipped)} {what}: {', '.join(skipped)}"] if skipped else []


def _audited_images(
    source: ImageSource,
    plan: list[PlannedInput],
    transform: Any,
    batch_size: int,
    details: dict[str, Any],
) -> Iterator[torch.Tensor]:
    """The image batches; once all are rendered, their duplicate audit joins ``details``."""
    shown: list[np.ndarray] = []
    yield from image_batches(source, plan, transform, batch_size, shown)
    inputs = [[(r.source, r.box) for r in regions(item)] for item in plan]
    details["input_audit"] = image_audit(np.stack(shown), inputs, len(source))


def size_warnings(T: int, n: int, d: int) -> list[str]:
    """Sizes under which an assumption cannot hold or cannot be tested."""
    warnings = []
    if n > d:
        warnings.append(f"n = {n} > d = {d}: no context matrix can have rank n (Assumption 2)")
    if n > T:
        warnings.append(f"T = {T} < n = {n}: the Kruskal rank at k = n cannot be tested")
    if d > T:
        warnings.append(f"T = {T} < d = {d}: general position (k = d) cannot be tested")
    return warnings
