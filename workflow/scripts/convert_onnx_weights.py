# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: convert a model's ONNX backbone once into a timm safetensors checkpoint."""

import sys

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

from memcap.errors import ConfigError  # noqa: E402
from memcap.extract.entries import model_entry  # noqa: E402
from memcap.extract.onnx_weights import convert_entry_weights  # noqa: E402

params = snakemake.params
entry = model_entry(params.entry, params.index, params.seed)
try:
    convert_entry_weights(entry, snakemake.output.checkpoint, snakemake.output.provenance)
except ConfigError as err:
    log.error("%s", err)
    print(f"convert_onnx_weights {entry.name}: {err}", file=sys.__stderr__)
    sys.exit(1)
