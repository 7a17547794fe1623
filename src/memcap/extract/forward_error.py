"""The forward pass's own error: the same inputs through the model in float64 and in its run
precision, compared at every extracted layer.

The assumption checks decide whether a set of stored vectors is independent; the honest
scale for "dependent" is how far the stored values sit from exact arithmetic on the same
inputs. On the first ``examples`` inputs of the job the extractor runs twice — as it ran
(float32, or bfloat16 where configured) and as a float64 copy (the same weights, widened
exactly) — and each layer records, on the stored values and on the equilibrated scale the
checks decide on (:mod:`memcap.numerics.equilibrate`):

* queries: the worst relative perturbation of one query ‖Δx‖₂/‖x‖₂, and of the examples' query
  matrix ‖ΔQ‖₂/‖Q‖₂ (Q balanced with the column factors of the whole stored set);
* contexts: the worst and median ‖ΔE‖₂/‖E‖₂ of one context matrix (each balanced on its own).

The examples run in chunks of CHUNK, so the float64 pass holds a few examples' states at a
time; the float64 copy of the model is the memory this costs.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from memcap.extract.config import ExtractSettings, ModelEntry
from memcap.extract.layer_spec import Layer
from memcap.extract.registry import DTYPES
from memcap.numerics.equilibrate import balance

_logger = logging.getLogger(__name__)

CHUNK = 8  # examples per forward of the comparison


def _slice(batch: Any, start: int, stop: int) -> Any:
    if isinstance(batch, dict):
        return {name: tensor[start:stop] for name, tensor in batch.items()}
    return batch[start:stop]


def _to(batch: Any, device: torch.device, dtype: torch.dtype) -> Any:
    """The batch on the device; floating inputs (images) in ``dtype``."""
    if isinstance(batch, dict):
        return {name: _to(tensor, device, dtype) for name, tensor in batch.items()}
    return batch.to(device, dtype) if batch.is_floating_point() else batch.to(device)


def _length(batch: Any) -> int:
    return len(next(iter(batch.values()))) if isinstance(batch, dict) else len(batch)


def job_forward_errors(
    entry: ModelEntry,
    settings: ExtractSettings,
    extractor: nn.Module,
    first: Any,
    n: Mapping[Layer, int],
    q: int,
    device: torch.device,
    outputs: Mapping[Layer, Any],
) -> dict[Layer, dict[str, Any]]:
    """One extraction job's forward error per layer, on its first input batch; none when
    switched off (``extract.error_examples: 0``) or the model is spread by a device map."""
    if not settings.error_examples or first is None or entry.device_map is not None:
        return {}
    queries = {layer: out.queries for layer, out in outputs.items()}
    return measure_forward_error(
        extractor, first, n, q, DTYPES[entry.precision], device, settings.error_examples, queries
    )


def measure_forward_error(
    extractor: nn.Module,
    batch: Any,
    n: int | Mapping[Layer, int],
    query_index: int,
    run_dtype: torch.dtype,
    device: torch.device,
    examples: int,
    queries: Mapping[Layer, Path],
) -> dict[Layer, dict[str, Any]]:
    """Each layer's relative error of the run-precision forward against float64.

    Args:
        extractor: the job's :class:`~memcap.extract.layers.MultiLayerExtractor` (left as is).
        batch: the job's first input batch, as the data loader gave it (on the CPU).
        n: context size (per layer where layers differ: a windowed model's stages);
            query_index: the query token.
        run_dtype: the precision the job ran its forward in.
        device: where it ran.
        examples: how many of the batch's examples to compare (at most the batch).
        queries: per layer, the stored (T, d) queries (their column balance scales the
            examples' queries as the checks see them).
    """
    started = time.perf_counter()
    count = min(examples, _length(batch))
    reference = copy.deepcopy(extractor).to(torch.float64)
    rows: dict[Layer, list[tuple[torch.Tensor, torch.Tensor]]] = {}
    contexts: dict[Layer, list[dict[str, torch.Tensor]]] = {}
    with torch.inference_mode():
        for start in range(0, count, CHUNK):
            part = _slice(batch, start, min(count, start + CHUNK))
            ran = extractor(_to(part, device, run_dtype))
            exact = reference(_to(part, device, torch.float64))
            for layer, states in ran.items():
                size = n[layer] if isinstance(n, Mapping) else n
                a = states[:, :size].to(torch.float64).cpu()  # (c, n, d)
                b = exact[layer][:, :size].cpu()
                rows.setdefault(layer, []).append((a[:, query_index], b[:, query_index]))
                contexts.setdefault(layer, []).append(_context_errors(a, b))
    del reference
    seconds = time.perf_counter() - started
    records = {}
    for layer, pairs in rows.items():
        stored, exact = (torch.cat(part) for part in zip(*pairs, strict=True))  # (E, d)
        columns = balance(torch.from_numpy(np.load(queries[layer]))).cols
        errors = {key: torch.cat([c[key] for c in contexts[layer]]) for key in contexts[layer][0]}
        records[layer] = {
            "examples": count,
            "precision": str(run_dtype).removeprefix("torch."),
            "reference": "float64",
            "seconds": round(seconds, 3),
            "queries": _query_errors(stored, exact, columns),
            "contexts": {
                scaling: {
                    "matrix_worst": float(values.max()),
                    "matrix_median": float(values.median()),
                }
                for scaling, values in errors.items()
            },
        }
    _logger.info(
        "forward error on %d examples in %.1f s: %s", count, seconds,
        {str(k): r["queries"]["equilibrate"]["vector_worst"] for k, r in records.items()},
    )  # fmt: skip
    return records


def _query_errors(
    stored: torch.Tensor, exact: torch.Tensor, columns: torch.Tensor
) -> dict[str, dict[str, float]]:
    """Per scaling: the worst relative error of one query, and of the (E, d) query matrix."""
    out = {}
    for scaling, scale in (("none", torch.ones_like(columns)), ("equilibrate", columns)):
        a, b = stored * scale, exact * scale
        norms = torch.linalg.vector_norm(b, dim=1)
        rows = torch.linalg.vector_norm(a - b, dim=1) / norms.clamp(min=1e-300)
        unit = 1.0 / norms.clamp(min=1e-300)[:, None]  # the balance's row step: unit rows
        out[scaling] = {
            "vector_worst": float(rows.max()),
            "vector_median": float(rows.median()),
            "matrix": float(_relative_2norms(a * unit, b * unit)),
        }
    return out


def _context_errors(stored: torch.Tensor, exact: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per scaling: ‖ΔE‖₂/‖E‖₂ of each (n, d) context of a chunk (balanced on its own)."""
    balanced = balance(stored)
    scaled = exact * balanced.rows.unsqueeze(-1) * balanced.cols.unsqueeze(-2)
    pairs = {"none": (stored, exact), "equilibrate": (balanced.values, scaled)}
    return {scaling: _relative_2norms(a, b) for scaling, (a, b) in pairs.items()}


def _relative_2norms(stored: torch.Tensor, exact: torch.Tensor) -> torch.Tensor:
    """‖stored − exact‖₂ / ‖exact‖₂ of each matrix of a batch, from the largest eigenvalue of
    the smaller Gram matrix (batched; a fraction of an SVD's cost)."""
    return (_norms2(stored - exact) / _norms2(exact).clamp(min=1e-300)).sqrt()


def _norms2(m: torch.Tensor) -> torch.Tensor:
    """‖m‖₂² of each matrix of a batch."""
    gram = m @ m.transpose(-1, -2) if m.shape[-2] <= m.shape[-1] else m.transpose(-1, -2) @ m
    return torch.linalg.eigvalsh(gram)[..., -1].clamp(min=0)
