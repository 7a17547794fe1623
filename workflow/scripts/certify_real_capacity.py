# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: certified capacity of one extracted model × layer, H = 1 … max."""

import time

import numpy as np
import pandas as pd

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

import torch  # noqa: E402

from memcap.capacity.real import real_capacity_rows  # noqa: E402
from memcap.provenance import write_provenance  # noqa: E402

torch.set_num_threads(snakemake.threads)
section = snakemake.params.section
queries = np.load(snakemake.input.queries, mmap_mode="r")
contexts = np.load(snakemake.input.contexts, mmap_mode="r")
start = time.perf_counter()
rows = real_capacity_rows(
    queries,
    contexts,
    max_heads=section["max_heads"],
    head_dim=section["head_dim"],
    max_examples=section["max_examples"],
    seed=snakemake.params.seed,
)
table = pd.DataFrame(rows).assign(model=snakemake.wildcards.model, layer=snakemake.wildcards.layer)
table.to_csv(snakemake.output.table, index=False)
log.info("certified capacity in %.1f s:\n%s", time.perf_counter() - start, table.to_string())
write_provenance(
    snakemake.output.provenance,
    stage="capacity",
    model=snakemake.wildcards.model,
    layer=snakemake.wildcards.layer,
    seed=snakemake.params.seed,
    settings=section,
    inputs=[snakemake.input.queries, snakemake.input.contexts],
)
