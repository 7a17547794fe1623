"""The decision scales of one layer, from the extraction's measured forward error.

The extraction records, per layer, how far the run-precision forward pass sits from a float64
pass on the same inputs (``forward_error`` in its provenance,
:mod:`memcap.extract.forward_error`). The queries are decided against the worst relative
perturbation of one query, the contexts against the worst of one context matrix, each on the
scaling the decisions are taken on. No decision is finer than the stored values' own rounding
(float32: δ ≥ 6.0e-8), and a layer extracted without the measurement falls back to the run
precision's rounding, saying so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from memcap.numerics.error import ErrorScale, stored_error
from memcap.numerics.tolerance import dtype_eps

STORED_DTYPE = np.float32  # what the extraction writes, whatever it ran in


@dataclass(frozen=True)
class LayerScales:
    """The decision scales of a layer's queries and contexts."""

    queries: ErrorScale
    contexts: ErrorScale
    measured: bool


def layer_scales(extraction: Mapping[str, Any], scaling: str) -> LayerScales:
    """The scales of a layer from its extraction record, on ``scaling`` (equilibrate | none)."""
    floor = stored_error(STORED_DTYPE).relative
    record = extraction.get("forward_error")
    if not record:
        precision = str(extraction.get("precision") or "float32")
        unit = max(dtype_eps(getattr(torch, precision, torch.float32)) / 2, floor)
        source = f"not measured: the {precision} rounding of the forward pass"
        return LayerScales(ErrorScale(unit, source), ErrorScale(unit, source), False)
    compared, precision = record["examples"], record["precision"]
    measured = record["queries"][scaling]
    queries, aligned = float(measured["vector_worst"]), float(measured["matrix"])
    contexts = float(record["contexts"][scaling]["matrix_worst"])
    how = f"{precision} against float64 on {compared} examples"
    return LayerScales(
        ErrorScale(
            max(queries, floor), f"measured ({how}): worst relative error of a query", aligned
        ),
        ErrorScale(max(contexts, floor), f"measured ({how}): worst relative error of a context"),
        True,
    )
