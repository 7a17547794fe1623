# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: certified capacity, H = 1 … max, of every detail layer of one model,
into the model's folder ({layer}.csv and {layer}_provenance.json per layer)."""

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
from memcap.extract.positions import repeat_cause  # noqa: E402
from memcap.extract.store import ExtractOutputs  # noqa: E402
from memcap.provenance import write_provenance  # noqa: E402

torch.set_num_threads(snakemake.threads)
section, model = snakemake.params.section, snakemake.wildcards.model
out = Path(snakemake.output.tables)
out.mkdir(parents=True)
for layer in snakemake.params.layers:
    files = ExtractOutputs.in_folder(snakemake.input.extraction, layer)
    start = time.perf_counter()
    extraction = json.loads(files.provenance.read_text())
    rows = real_capacity_rows(
        np.load(files.queries, mmap_mode="r"),
        np.load(files.contexts, mmap_mode="r"),
        max_heads=section["max_H"],
        head_dim=section["d_h"],
        max_examples=section["max_T"],
        seed=snakemake.params.seed,
        draws=section["draws"],
        shared_contexts=section["shared_contexts"],
        spread_heads=section["spread_H"],
        delta=forward_error(extraction),
        repeat_cause=repeat_cause(extraction.get("positions"), layer),
    )
    table = pd.DataFrame(rows).assign(model=model, layer=layer)
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
        inputs=[str(files.queries), str(files.contexts), str(files.provenance)],
    )
