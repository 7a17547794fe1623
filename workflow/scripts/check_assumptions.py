# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: both assumption checks of every layer of one model, and its depth
profile, into the model's folder (memcap.assumptions.job)."""

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

import torch  # noqa: E402

from memcap.assumptions.job import check_model  # noqa: E402
from memcap.assumptions.null_table import null_source  # noqa: E402
from memcap.devices import peak_memory_gb, reset_peak_memory, resolve_device  # noqa: E402

torch.set_num_threads(snakemake.threads)
params = snakemake.params
device = resolve_device(params.device)
reset_peak_memory(device)
check_model(
    snakemake.wildcards.model,
    snakemake.input.extraction,
    snakemake.output.checks,
    layers=params.layers,
    detail_layers=params.detail_layers,
    section=params.settings,
    depth_profile=params.depth_profile,
    device=device,
    workers=snakemake.threads,
    null=null_source(params.null_table),
)
log.info("peak GPU memory: %s GB", peak_memory_gb(device))  # None off CUDA; read by the scale audit
