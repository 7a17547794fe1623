# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: extract every requested layer of one model, from one pass per batch,
into the model's folder (one subfolder per layer; contexts of the detail layers only)."""

import sys
from pathlib import Path

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

from memcap.errors import ConfigError  # noqa: E402
from memcap.extract.config import ExtractSettings  # noqa: E402
from memcap.extract.entries import model_entry  # noqa: E402
from memcap.extract.job import extract_layers  # noqa: E402
from memcap.extract.layer_spec import parse_layer  # noqa: E402
from memcap.extract.store import ExtractOutputs  # noqa: E402

params = snakemake.params
entry = model_entry(params.entry, params.index, params.seed)
outputs = {
    parse_layer(layer): ExtractOutputs.in_folder(
        snakemake.output.model, layer, contexts=layer in params.detail_layers
    )
    for layer in params.layers
}
settings = ExtractSettings(
    batch_size=params.batch_size,
    device=params.device,
    context_rtol=params.context_rtol,
    error_examples=params.error_examples,
)
try:
    checkpoint = snakemake.input.get("checkpoint")  # a converted ONNX backbone, if any
    extract_layers(
        entry,
        outputs,
        settings,
        threads=snakemake.threads,
        checkpoint=Path(checkpoint) if checkpoint else None,
    )
except ConfigError as err:
    # A config problem (e.g. unreachable pretrained weights) is one line, not a traceback:
    # in the job log, and on the terminal, where Snakemake does not show the log.
    log.error("%s", err)
    print(f"extract_model {entry.name}: {err}", file=sys.__stderr__)
    sys.exit(1)
