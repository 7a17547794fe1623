# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: context ranks and Kruskal profile of one model × layer."""

import json
from pathlib import Path

import numpy as np

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

import torch  # noqa: E402

from memcap import assumptions  # noqa: E402
from memcap.devices import resolve_device  # noqa: E402
from memcap.numerics import load_context_ranks  # noqa: E402
from memcap.plotting import save_figure  # noqa: E402
from memcap.provenance import array_checksum, write_provenance  # noqa: E402

torch.set_num_threads(snakemake.threads)
model, layer = snakemake.wildcards.model, snakemake.wildcards.layer
title = f"{model} · layer {layer}"
settings = assumptions.AssumptionsSettings.from_config(snakemake.params.settings)
device = resolve_device(snakemake.params.device)
extraction = json.loads(Path(snakemake.input.provenance).read_text())
common = {
    "stage": "assumptions",
    "model": model,
    "layer": layer,
    "settings": snakemake.params.settings,
    "extraction": extraction,
}
out = snakemake.output

# Assumption 2: the ranks of every context matrix, computed while the extraction streamed them.
ranks = load_context_ranks(snakemake.input.context_ranks)
log.info("context ranks of %d contexts (n = %d, d = %d)", len(ranks.rank), ranks.n, ranks.d)
table = assumptions.context_table(ranks)
table.to_csv(out.context_table, index=False)
record = assumptions.context_record(ranks)
log.info("context ranks: %s", json.dumps(record))
write_provenance(
    out.context_summary,
    check="context_rank",
    **common,
    **record,
    inputs=[snakemake.input.context_ranks],
)
save_figure(assumptions.plot_context_ranks(table, ranks.n, title), out.context_figure)

# Assumption 1 and general position: P(k) for every k from random orderings of the queries.
queries = np.load(snakemake.input.queries)
log.info("queries %s %s, n = %s", queries.shape, queries.dtype, extraction["n"])
profile = settings.profile(queries, settings.samples, device, snakemake.threads, progress=True)
table = assumptions.profile_table(profile, settings.confidence)
table.to_csv(out.profile_table, index=False)
record = assumptions.kruskal_record(profile, int(extraction["n"]), settings.confidence)
log.info("Kruskal profile: %s", json.dumps({k: v for k, v in record.items() if k != "pairs"}))
write_provenance(
    out.profile_summary,
    check="kruskal_profile",
    **common,
    **record,
    queries_checksum=array_checksum([queries]),
    inputs=[snakemake.input.queries],
)
figure = assumptions.plot_profile(table, record["n"], profile.d, title)
save_figure(figure, out.profile_figure)
