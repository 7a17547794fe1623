"""One extraction job: a model entry's layers -> queries.npy, provenance.json each, and
contexts.npy for the layers that store them (the detail layers; depth rows do not).

Order of work: build the model, check every size that needs it (layer depth, context size,
query index, tokenizer vocabulary, data size; :mod:`memcap.extract.inputs`) -> only then run
batched, no-grad forwards (one per batch for all the requested layers) and stream the results
to disk.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from threadpoolctl import threadpool_limits
from tqdm import tqdm

from memcap.devices import (
    host_pool,
    peak_memory_gb,
    reset_peak_memory,
    resolve_device,
    synchronize,
)
from memcap.errors import ConfigError
from memcap.extract.config import ExtractSettings, ModelEntry, entry_error
from memcap.extract.forward_error import job_forward_errors
from memcap.extract.inputs import check_against_model, prepare_inputs, resolve_n, size_warnings
from memcap.extract.layer_spec import RANDOM_ATTENTION, Layer, layer_name
from memcap.extract.layers import MultiLayerExtractor, blocks_needed
from memcap.extract.registry import (
    DTYPES,
    Architecture,
    architecture,
    create_model,
    parameter_checksum,
    parameter_count,
    position_encoding,
    position_mechanism,
)
from memcap.extract.store import ChunkedArrayWriter, ExtractOutputs, OrderedWrites
from memcap.extract.weights import weights_provenance
from memcap.extract.windows import stage_records
from memcap.numerics.context_rank import ContextRankStream, save_context_ranks
from memcap.provenance import write_provenance

_logger = logging.getLogger(__name__)


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

    Raises:
        ConfigError: a value that cannot work with the built model, naming the entry.
    """
    try:
        return _extract_layers(entry, outputs, settings, threads, checkpoint)
    except ConfigError as err:
        raise entry_error(err, entry.index, entry.name) from None


def _extract_layers(
    entry: ModelEntry,
    outputs: Mapping[Layer, ExtractOutputs],
    settings: ExtractSettings,
    threads: int,
    checkpoint: Path | None,
) -> dict[Layer, dict[str, Any]]:
    started = time.perf_counter()
    layers = tuple(outputs)
    device = resolve_device(settings.device)
    torch.set_num_threads(threads)  # on a GPU, each host-solve thread of the pool runs one
    # NumPy's BLAS (the context ranks' Gram matrices and eigenvalues): the job's threads on the
    # CPU; one per host-solve thread beside a GPU
    threadpool_limits(limits=threads if device.type == "cpu" else 1, user_api="blas")
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
    T, q = entry.data.T, entry.resolved_query_index
    sizes = {layer: arch.sizes(layer, n) for layer in layers}  # (n, d) of each layer
    warnings = loaded.warnings + prepared.warnings
    for n_k, d_k in dict.fromkeys(sizes.values()):
        warnings += [w for w in size_warnings(T, n_k, d_k) if w not in warnings]
    for message in warnings:
        _logger.warning("%s: %s", entry.name, message)

    writers = {
        layer: (
            ChunkedArrayWriter(outputs[layer].queries, (T, sizes[layer][1])),
            _contexts_writer(outputs[layer].contexts, (T, *sizes[layer])),
        )
        for layer in layers
    }
    pool = host_pool(device)  # the host's eigenvalue solves beside a GPU's forwards
    # A 7B model's checksum reads 26 GB as float32: on the pool, while the forwards run.
    checksum = pool.submit(parameter_checksum, loaded.module) if pool is not None else None
    streams = {
        layer: ContextRankStream(
            *sizes[layer], rtol=settings.context_rtol, device=device, pool=pool
        )
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
                hidden = states[:, : sizes[layer][0]].float()  # (B, n, d), float32 always
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
    contexts_n = {layer: sizes[layer][0] for layer in layers}
    errors = job_forward_errors(entry, settings, extractor, first, contexts_n, q, device, outputs)
    _logger.info(
        "wrote queries (T, d) and contexts (T, n, d) of layers %s (contexts stored of %s)",
        {layer_name(x): (T, *sizes[x]) for x in layers},
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
        position_mechanism=position_mechanism(loaded.module, arch.config),
        # ALBERT: layer k is the k-th application of one block's parameters
        shared_weights=arch.shared_blocks,
        seed=entry.seed,
        data_seed=entry.data.seed,
        data_source=prepared.description,
        data=asdict(entry.data),
        **prepared.details,
        pass_layers=[layer_name(x) for x in layers],
        blocks_in_pass=extractor.trunk.depth,
        depth=loaded.depth,
        T=T,
        query_index=q,
        stages=stage_records(arch.windows) if arch.windows else None,
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
            **_layer_sizes(arch, layer, *sizes[layer]),
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


def _layer_sizes(arch: Architecture, layer: Layer, n: int, d: int) -> dict[str, Any]:
    """A layer's n, d and heads, and in a windowed model the windows it reads."""
    if not arch.windows:
        return {"n": n, "d": d, "heads": arch.H, "head_dim": arch.d_h, "window": None}
    window = arch.windows[blocks_needed(layer)]
    return {
        "n": n,
        "d": d,
        "heads": window.H,
        "head_dim": window.d_h,
        "window": window.record(),
    }


def _contexts_writer(path: Path | None, shape: tuple[int, ...]) -> ChunkedArrayWriter | None:
    """The contexts' writer, or None for a layer whose contexts are not stored."""
    return None if path is None else ChunkedArrayWriter(path, shape)


def _to_device(batch: Any, device: torch.device, dtype: torch.dtype) -> Any:
    """The batch on the device; images (floating tensors) in the forward precision."""
    if isinstance(batch, dict):
        return {name: _to_device(tensor, device, dtype) for name, tensor in batch.items()}
    return batch.to(device, dtype) if batch.is_floating_point() else batch.to(device)
