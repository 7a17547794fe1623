# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: extract one (model, layer) of the config into queries/contexts .npy."""

import sys
from pathlib import Path

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

from memcap.errors import ConfigError  # noqa: E402
from memcap.extract.config import ExtractSettings, model_entry, parse_layer  # noqa: E402
from memcap.extract.job import ExtractOutputs, run_extraction  # noqa: E402

params = snakemake.params
entry = model_entry(params.entry, params.index, params.seed)
layer = snakemake.wildcards.layer
outputs = ExtractOutputs(
    queries=snakemake.output.queries,
    contexts=snakemake.output.contexts,
    provenance=snakemake.output.provenance,
)
settings = ExtractSettings(batch_size=params.batch_size, device=params.device)
try:
    checkpoint = snakemake.input.get("checkpoint")  # a converted ONNX backbone, if any
    run_extraction(
        entry,
        parse_layer(layer),
        settings,
        outputs,
        threads=snakemake.threads,
        checkpoint=Path(checkpoint) if checkpoint else None,
    )
except ConfigError as err:
    # A config problem (e.g. unreachable pretrained weights) is one line, not a traceback:
    # in the job log, and on the terminal, where Snakemake does not show the log.
    log.error("%s", err)
    print(f"extract_embeddings {entry.name}/{layer}: {err}", file=sys.__stderr__)
    sys.exit(1)
