# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: each depth-profiled model's depth profile from its layers' folders
(memcap.assumptions.job.write_depth_profile), and one row per audited model × layer in
results/assumptions/summary.csv.

A model with a depth profile takes its rows (detail and depth) from its depth.csv; the others
from their detail layers' summaries (files in the check jobs' folders, named in params).
"""

import json
from pathlib import Path

import pandas as pd

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

from memcap.assumptions import depth, summary  # noqa: E402
from memcap.assumptions.job import write_depth_profile  # noqa: E402

params, output = snakemake.params, snakemake.output
profiled = {}
for model, folders, table, profiles, figure in zip(
    params.depth_models, params.depth_layers, output.depth, output.profiles, output.figures,
    strict=True,
):  # fmt: skip
    write_depth_profile(model, folders, table, profiles, figure)
    rows = pd.read_csv(table, dtype={"layer": str})
    if len(rows):
        profiled[model] = depth.summary_rows(rows)
rows, done = [], set()
for kruskal_path, context_path in zip(params.kruskal, params.contexts, strict=True):
    kruskal = json.loads(Path(kruskal_path).read_text())
    model = kruskal["model"]
    if model in profiled:
        rows += profiled.pop(model)
        done.add(model)
    if model in done:
        continue
    context = json.loads(Path(context_path).read_text())
    row = summary.summary_row(model, kruskal["layer"], context, kruskal)
    rows.append(row | {"role": "detail"})
for remaining in profiled.values():  # models whose every layer is a depth row
    rows += remaining
table = summary.summary_table(rows)
table.to_csv(output.summary, index=False)
log.info("assumptions summary:\n%s", table.to_string())
