# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: a model's assumptions folder from its layer jobs' folders
(memcap.assumptions.job.merge_layers; assumptions.cut: layer)."""

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

from memcap.assumptions.job import merge_layers  # noqa: E402

folders = dict(zip(snakemake.params.layers, snakemake.input.layers, strict=True))
merge_layers(
    snakemake.wildcards.model,
    folders,
    snakemake.output.checks,
    depth_profile=snakemake.params.depth_profile,
)
log.info("%s: %d layers merged", snakemake.wildcards.model, len(folders))
