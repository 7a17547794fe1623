# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: move one layer's files out of its model's one-pass folder."""

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

from memcap.extract.store import take_layer  # noqa: E402

take_layer(snakemake.input.layers, snakemake.wildcards.layer, snakemake.output)
