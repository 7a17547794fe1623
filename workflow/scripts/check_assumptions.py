# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: both assumption checks of one check job's layers (every layer of a
model, or one: the {job} wildcard, memcap.assumptions.cut), each into its layer's folder
(memcap.assumptions.job)."""

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

import torch  # noqa: E402

from memcap.assumptions.cut import layer_folders, parse_job  # noqa: E402
from memcap.assumptions.job import check_layers  # noqa: E402
from memcap.assumptions.null_table import null_source  # noqa: E402
from memcap.devices import peak_memory_gb, reset_peak_memory, resolve_device  # noqa: E402

torch.set_num_threads(snakemake.threads)
params = snakemake.params
job = snakemake.wildcards.job
device = resolve_device(params.device)
reset_peak_memory(device)
check_layers(
    parse_job(job)[0],
    snakemake.input.extraction,
    layer_folders(job, snakemake.output.checks, params.layers),
    detail_layers=params.detail_layers,
    section=params.settings,
    device=device,
    workers=snakemake.threads,
    null=null_source(params.null_table),
)
log.info("peak GPU memory: %s GB", peak_memory_gb(device))  # None off CUDA; read by the scale audit
