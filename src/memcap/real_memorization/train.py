"""One layer through the synthetic stage's protocol, once per input (real and controls)."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch

from memcap.real_memorization.inputs import Examples, layer_draw
from memcap.real_memorization.settings import layer_stage, sweep
from memcap.synthetic.settings import StageSettings
from memcap.synthetic.summary import capacity_table
from memcap.synthetic.sweep import run_sweep

_logger = logging.getLogger(__name__)


@dataclass
class LayerResult:
    """Every replica's row, every seed's capacity row, and each input's data checksum."""

    replicas: pd.DataFrame
    capacity: pd.DataFrame
    checksums: dict[str, str]


def train_layer(
    examples: Examples,
    section: Mapping[str, Any],
    synthetic: StageSettings,
    device: torch.device,
) -> LayerResult:
    """Train the ``real_memorization`` section's heads sweep on one layer's ``examples``, once
    per input of ``section["inputs"]``, with the synthetic stage's model and protocol."""
    T, _, d = examples.shape
    stage = layer_stage(synthetic, section, d, T)
    spec = sweep(section)
    replicas, capacity, checksums = [], [], {}
    for kind in section["inputs"]:
        start = time.perf_counter()
        draw = layer_draw(examples, kind, stage.base_seed, stage.classes)
        result = run_sweep(spec, stage, device, draw)
        rows = result.table.assign(input=kind)
        replicas.append(rows)
        capacity.append(capacity_table(result.table).assign(input=kind))
        checksums[kind] = result.data_checksum
        wall = time.perf_counter() - start
        _logger.info("input %s: %d replicas in %.1f s", kind, len(rows), wall)
    return LayerResult(
        pd.concat(replicas, ignore_index=True), pd.concat(capacity, ignore_index=True), checksums
    )
