# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: one row per model × layer in results/assumptions/summary.csv."""

import json
from pathlib import Path

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

from memcap import assumptions  # noqa: E402

rows = []
for kruskal_path, context_path in zip(
    snakemake.input.kruskal, snakemake.input.contexts, strict=True
):
    kruskal = json.loads(Path(kruskal_path).read_text())
    context = json.loads(Path(context_path).read_text())
    rows.append(assumptions.summary_row(kruskal["model"], kruskal["layer"], context, kruskal))
table = assumptions.summary_table(rows)
table.to_csv(snakemake.output.summary, index=False)
log.info("assumptions summary:\n%s", table.to_string())
