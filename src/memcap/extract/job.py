"""One extraction job: a model entry's layers -> queries.npy, provenance.json each, and
contexts.npy for the layers that store them (the detail layers; depth rows do not).

Order of work: build the model, check every size that needs it (layer depth, context size,
query index, tokenizer vocabulary, data size) -> only then run batched, no-grad forwards (one
per batch for all the requested layers) and stream the results to disk.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from memcap.devices import (
    host_pool,
    peak_memory_gb,
    reset_peak_memory,
    resolve_device,
    synchronize,
)
from memcap.errors import ConfigError
from memcap.extract.audit import image_audit, text_audit
from memcap.extract.config import ExtractSettings, ModelEntry
from memcap.extract.corpus import load_documents
from memcap.extract.forward_error import job_forward_errors
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
from memcap.extract.layer_spec import RANDOM_ATTENTION, Layer, layer_name
from memcap.extract.layers import MultiLayerExtractor, blocks_needed
from memcap.extract.registry import (
    DTYPES,
    Architecture,
    LoadedModel,
    architecture,
    create_model,
    parameter_checksum,
    parameter_count,
    position_encoding,
)
from memcap.extract.store import ChunkedArrayWriter, OrderedWrites
from memcap.extract.text import (
    document_tokens,
    document_windows,
    resolve_tokenizer,
    text_batches,
    text_inputs,
    use_bos,
    window_labels,
    window_length,
)
from memcap.extract.weights import weights_provenance
from memcap.numerics.context_rank import ContextRankStream, save_context_ranks
from memcap.provenance import write_provenance

_logger = logging.getLogger(__name__)

DEFAULT_TEXT_N = 128  # text context size when n is not set (capped by d and the positions)
TOKENS_HEAD = 4  # leading token ids per text example kept in provenance


@dataclass(frozen=True)
class ExtractOutputs:
    """Paths one job writes."""

    queries: Path  # (T, d) float32
    contexts: Path | None  # (T, n, d) float32; None: not stored (a depth row)
    provenance: Path
    context_ranks: Path | None = None  # Assumption 2's ranks, streamed (None: not computed)


@dataclass
class PreparedInputs:
    """Batches to feed the model, plus what the provenance says about them."""

    batches: Iterator[Any]
    description: str
    details: dict[str, Any]
    warnings: list[str]


def resolve_n(entry: ModelEntry, arch: Architecture) -> int:
    """Context size: configured, or all tokens incl. prefix / register tokens (vit) or
    min(128, d, positions) (text)."""
    if entry.n is not None:
        return entry.n
    if entry.kind == "vit":
        return arch.max_tokens
    return min(DEFAULT_TEXT_N, arch.width, arch.max_tokens)


def check_against_model(entry: ModelEntry, layer: Layer, n: int, arch: Architecture) -> None:
    """Checks that need the model's sizes; raise :class:`ConfigError` before weights load."""
    if layer != RANDOM_ATTENTION and int(layer) > arch.depth:
        raise ConfigError(
            f"{entry.key}.layers",
            f"layer {layer} is beyond the depth of '{entry.model}' ({arch.depth} blocks)",
            f"use layers between 0 and {arch.depth}",
        )
    if n > arch.max_tokens:
        what = "tokens per image" if entry.kind == "vit" else "positions"
        raise ConfigError(
            f"{entry.key}.n",
            f"n = {n} exceeds the model's {arch.max_tokens} {what}",
            f"use n <= {arch.max_tokens}",
        )
    q = entry.resolved_query_index
    if not -n <= q < n:
        raise ConfigError(
            f"{entry.key}.query_index",
            f"query index {q} is outside a context of n = {n} tokens",
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
    if entry.kind == "encoder" and (tokenizer.cls_id is None or tokenizer.sep_id is None):
        raise ConfigError(
            f"{entry.key}.tokenizer", "the tokenizer has no [CLS] / [SEP] tokens", "use another"
        )
    bos = use_bos(entry, tokenizer, n)
    length = window_length(entry.family, n, bos)
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
            "tokenizer_substitute": tokenizer.substitute,
            "bos_token_id": tokenizer.bos_id,
            "bos_prepended": bos,
            "example_inputs": window_labels(windows, documents),
            "example_tokens_head": inputs["input_ids"][:, :TOKENS_HEAD].tolist(),
        },
        warnings=warnings,
    )


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


def run_extraction(
    entry: ModelEntry,
    layer: Layer,
    settings: ExtractSettings,
    outputs: ExtractOutputs,
    threads: int = 1,
    checkpoint: Path | None = None,
) -> dict[str, Any]:
    """Extract one layer: :func:`extract_layers` with a single layer; its provenance record."""
    return extract_layers(entry, {layer: outputs}, settings, threads, checkpoint)[layer]


def extract_layers(
    entry: ModelEntry,
    outputs: Mapping[Layer, ExtractOutputs],
    settings: ExtractSettings,
    threads: int = 1,
    checkpoint: Path | None = None,
) -> dict[Layer, dict[str, Any]]:
    """Extract queries (T, d) and contexts (T, n, d) of several layers from one pass per batch.

    Args:
        entry: the model's config entry.
        outputs: where to write, per layer to extract.
        settings: stage-wide settings (batch size, device).
        threads: CPU threads for torch.
        checkpoint: a converted checkpoint (ONNX weights) to load instead of ``entry.weights``.

    Returns:
        The provenance record of each layer.
    """
    started = time.perf_counter()
    layers = tuple(outputs)
    device = resolve_device(settings.device)
    torch.set_num_threads(threads)  # on a GPU, each host-solve thread of the pool runs one
    reset_peak_memory(device)
    # Rank checks downstream need full float32 products, not TF32.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    arch = architecture(entry)
    n = resolve_n(entry, arch)
    for layer in layers:
        check_against_model(entry, layer, n, arch)
    loaded = create_model(entry, arch, checkpoint, device)
    prepared = prepare_inputs(entry, loaded, n, settings.batch_size)
    extractor = MultiLayerExtractor(loaded.module, loaded.width, layers, entry.seed)
    if entry.device_map is None:
        extractor = extractor.to(device)
    else:  # accelerate placed the blocks; inputs and the random head go where the embeddings are
        device = loaded.module.device
        extractor.head.to(device)
    extractor.eval()
    T, d, q = entry.data.T, loaded.width, entry.resolved_query_index
    warnings = loaded.warnings + prepared.warnings + size_warnings(T, n, d)
    for message in warnings:
        _logger.warning("%s: %s", entry.name, message)

    writers = {
        layer: (
            ChunkedArrayWriter(outputs[layer].queries, (T, d)),
            _contexts_writer(outputs[layer].contexts, (T, n, d)),
        )
        for layer in layers
    }
    pool = host_pool(device)  # the host's eigenvalue solves beside a GPU's forwards
    # A 7B model's checksum reads 26 GB as float32: on the pool, while the forwards run.
    checksum = pool.submit(parameter_checksum, loaded.module) if pool is not None else None
    streams = {
        layer: ContextRankStream(n, d, rtol=settings.context_rtol, device=device, pool=pool)
        for layer in layers
        if outputs[layer].context_ranks is not None
    }
    rank_seconds = dict.fromkeys(streams, 0.0)
    writes = OrderedWrites(background=pool is not None)  # to disk while a GPU runs on
    first = None  # the first input batch, for the forward error's float64 pass
    bar = tqdm(total=T, desc=entry.name, unit="ex")
    with pool or nullcontext(), torch.inference_mode(), bar:
        for batch in prepared.batches:
            first = batch if first is None else first
            batch = _to_device(batch, device, DTYPES[entry.precision])
            for layer, states in extractor(batch).items():
                hidden = states[:, :n].float()  # (B, n, d), float32 whatever the precision
                queries, contexts = writers[layer]
                if contexts is not None:
                    writes.write(contexts, hidden.cpu().numpy())
                writes.write(queries, hidden[:, q].cpu().numpy())  # (B, d)
                if layer in streams:  # Assumption 2 on the values as stored, while they pass
                    ranking = time.perf_counter()
                    streams[layer].add(hidden)
                    synchronize(device)
                    rank_seconds[layer] += time.perf_counter() - ranking
            bar.update(len(hidden))
        for layer, stream in streams.items():  # waits for the host's solves
            ranking = time.perf_counter()
            ranks = stream.result()
            rank_seconds[layer] += time.perf_counter() - ranking
            save_context_ranks(outputs[layer].context_ranks, ranks)
        writes.wait()
    checksums = {
        layer: (q_w.close(), c_w.close() if c_w is not None else None)
        for layer, (q_w, c_w) in writers.items()
    }
    errors = job_forward_errors(entry, settings, extractor, first, n, q, device, outputs)
    _logger.info(
        "wrote queries (%d, %d) of layers %s, contexts (%d, %d, %d) of %s",
        T,
        d,
        [layer_name(x) for x in layers],
        T,
        n,
        d,
        [layer_name(x) for x in layers if outputs[x].contexts is not None],
    )

    shared = dict(
        model=entry.name,
        family=entry.family,
        kind=entry.kind,
        library=arch.library,
        model_id=loaded.model_id,
        model_kwargs=dict(entry.model_kwargs),
        description=entry.description,
        stands_in_for=entry.stands_in_for,
        weights=entry.weights,
        weights_source=loaded.weights_source,
        weights_origin=weights_provenance(entry, checkpoint),
        precision=entry.precision,
        device_map=entry.device_map,
        parameters=parameter_count(loaded.module),
        parameter_checksum=checksum.result() if checksum else parameter_checksum(loaded.module),
        prefix_tokens=arch.prefix_tokens if entry.kind == "vit" else None,
        positions=position_encoding(loaded.module, arch.config),
        seed=entry.seed,
        data_seed=entry.data.seed,
        data_source=prepared.description,
        data=asdict(entry.data),
        **prepared.details,
        pass_layers=[layer_name(x) for x in layers],
        blocks_in_pass=extractor.trunk.depth,
        depth=loaded.depth,
        T=T,
        n=n,
        d=d,
        query_index=q,
        warnings=warnings,
        device=str(device),
        batch_size=settings.batch_size,
        seconds=round(time.perf_counter() - started, 2),
        peak_gpu_memory_gb=peak_memory_gb(device),
    )
    head = parameter_checksum(extractor.head) if RANDOM_ATTENTION in layers else None
    return {
        layer: write_provenance(
            outputs[layer].provenance,
            **shared,
            layer=layer_name(layer),
            blocks_run=blocks_needed(layer),
            # The random_attention head attends both ways whatever the model does.
            causal=entry.kind == "decoder" and layer != RANDOM_ATTENTION,
            random_attention_checksum=head if layer == RANDOM_ATTENTION else None,
            context_rank_seconds=round(rank_seconds[layer], 3) if layer in streams else None,
            forward_error=errors.get(layer),
            queries_sha256=checksums[layer][0],
            contexts_sha256=checksums[layer][1],
        )
        for layer in layers
    }


def _contexts_writer(path: Path | None, shape: tuple[int, ...]) -> ChunkedArrayWriter | None:
    """The contexts' writer, or None for a layer whose contexts are not stored."""
    return None if path is None else ChunkedArrayWriter(path, shape)


def _to_device(batch: Any, device: torch.device, dtype: torch.dtype) -> Any:
    """The batch on the device; images (floating tensors) in the forward precision."""
    if isinstance(batch, dict):
        return {name: _to_device(tensor, device, dtype) for name, tensor in batch.items()}
    return batch.to(device, dtype) if batch.is_floating_point() else batch.to(device)
