# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: numerical rank of every context matrix of one model × layer."""

import json
from pathlib import Path

import numpy as np

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

import torch  # noqa: E402

from memcap import assumptions  # noqa: E402
from memcap.context_rank import context_ranks  # noqa: E402
from memcap.devices import resolve_device  # noqa: E402
from memcap.plotting import save_figure  # noqa: E402
from memcap.provenance import write_provenance  # noqa: E402

torch.set_num_threads(snakemake.threads)
model, layer = snakemake.wildcards.model, snakemake.wildcards.layer
settings = assumptions.AssumptionsSettings.from_config(snakemake.params.settings)
contexts = np.load(snakemake.input.contexts, mmap_mode="r")
log.info("contexts %s %s of %s / %s", contexts.shape, contexts.dtype, model, layer)
ranks = context_ranks(
    contexts,
    rtol=settings.context_rtol,
    chunk=settings.context_chunk,
    device=resolve_device(snakemake.params.device),
    progress=True,
)
table = assumptions.context_table(ranks)
table.to_csv(snakemake.output.table, index=False)
record = assumptions.context_record(ranks)
log.info("context ranks: %s", json.dumps(record))
write_provenance(
    snakemake.output.summary,
    stage="assumptions",
    check="context_rank",
    model=model,
    layer=layer,
    **record,
    settings=snakemake.params.settings,
    extraction=json.loads(Path(snakemake.input.provenance).read_text()),
    inputs=[snakemake.input.contexts],
)
figure = assumptions.plot_context_ranks(table, ranks.n, f"{model} · layer {layer}")
save_figure(figure, snakemake.output.figure)
