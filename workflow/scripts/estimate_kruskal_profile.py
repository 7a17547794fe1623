# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: Kruskal profile P(k) and certificates of one model × layer's queries."""

import json
from pathlib import Path

import numpy as np

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

import torch  # noqa: E402

from memcap import assumptions  # noqa: E402
from memcap.devices import resolve_device  # noqa: E402
from memcap.plotting import save_figure  # noqa: E402
from memcap.provenance import array_checksum, write_provenance  # noqa: E402
from memcap.rank import kruskal_profile  # noqa: E402

torch.set_num_threads(snakemake.threads)
model, layer = snakemake.wildcards.model, snakemake.wildcards.layer
settings = assumptions.AssumptionsSettings.from_config(snakemake.params.settings)
extraction = json.loads(Path(snakemake.input.provenance).read_text())
queries = np.load(snakemake.input.queries)
log.info("queries %s %s of %s / %s, n = %s", queries.shape, queries.dtype, model, layer,
         extraction["n"])  # fmt: skip
profile = kruskal_profile(
    queries,
    settings.samples,
    seed=settings.seed,
    rtol=settings.rtol,
    near_duplicate_cosine=settings.near_duplicate_cosine,
    device=resolve_device(snakemake.params.device),
    method=settings.method,
    progress=True,
)
table = assumptions.profile_table(profile, settings.confidence)
table.to_csv(snakemake.output.table, index=False)
record = assumptions.kruskal_record(profile, int(extraction["n"]), settings.confidence)
log.info("Kruskal profile: %s", json.dumps({k: v for k, v in record.items() if k != "pairs"}))
write_provenance(
    snakemake.output.summary,
    stage="assumptions",
    check="kruskal_profile",
    model=model,
    layer=layer,
    **record,
    settings=snakemake.params.settings,
    queries_checksum=array_checksum([queries]),
    extraction=extraction,
    inputs=[snakemake.input.queries],
)
figure = assumptions.plot_profile(table, record["n"], profile.d, f"{model} · layer {layer}")
save_figure(figure, snakemake.output.figure)
