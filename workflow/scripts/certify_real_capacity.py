# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: certified capacity, H = 1 … max, of every detail layer of one model,
into the job's temporary folder (one subfolder per layer)."""

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

import torch  # noqa: E402

from memcap.capacity.real import real_capacity_rows  # noqa: E402
from memcap.capacity.spectrum import forward_error  # noqa: E402
from memcap.provenance import write_provenance  # noqa: E402

torch.set_num_threads(snakemake.threads)
section, model = snakemake.params.section, snakemake.wildcards.model
root = Path(snakemake.output.tables)
root.mkdir(parents=True)  # one subfolder per layer
inputs = zip(
    snakemake.params.layers,
    snakemake.input.queries,
    snakemake.input.contexts,
    snakemake.input.provenance,
    strict=True,
)
for layer, queries_path, contexts_path, provenance_path in inputs:
    start = time.perf_counter()
    rows = real_capacity_rows(
        np.load(queries_path, mmap_mode="r"),
        np.load(contexts_path, mmap_mode="r"),
        max_heads=section["max_H"],
        head_dim=section["d_h"],
        max_examples=section["max_T"],
        seed=snakemake.params.seed,
        draws=section["draws"],
        shared_contexts=section["shared_contexts"],
        spread_heads=section["spread_H"],
        delta=forward_error(json.loads(Path(provenance_path).read_text())),
    )
    table = pd.DataFrame(rows).assign(model=model, layer=layer)
    out = root / layer
    out.mkdir()
    table.to_csv(out / f"{layer}.csv", index=False)
    first = table[(table["shared_context"] <= 0) & (table["draw"] == 0)]
    log.info("layer %s in %.1f s:\n%s", layer, time.perf_counter() - start, first.to_string())
    write_provenance(
        out / f"{layer}_provenance.json",
        stage="capacity",
        model=model,
        layer=layer,
        seed=snakemake.params.seed,
        settings=section,
        inputs=[queries_path, contexts_path, provenance_path],
    )
