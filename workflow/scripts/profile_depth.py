# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: the depth profile of one model (depth rows checked, detail layers read)."""

import json
from pathlib import Path

import numpy as np

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

import torch  # noqa: E402

from memcap import assumptions, depth  # noqa: E402
from memcap.devices import resolve_device  # noqa: E402
from memcap.numerics import load_context_ranks  # noqa: E402
from memcap.plotting import save_figure  # noqa: E402

torch.set_num_threads(snakemake.threads)
model = snakemake.wildcards.model
settings = assumptions.AssumptionsSettings.from_config(snakemake.params.settings)
device = resolve_device(snakemake.params.device)
inputs, params = snakemake.input, snakemake.params

rows, profiles = [], {}
for layer, queries_path, ranks_path, provenance_path in zip(
    params.depth_rows, inputs.queries, inputs.context_ranks, inputs.provenance, strict=True
):
    n = int(json.loads(Path(provenance_path).read_text())["n"])
    context = assumptions.context_record(load_context_ranks(ranks_path))
    queries = np.load(queries_path)
    profile = settings.profile(queries, settings.depth_samples, device, snakemake.threads)
    kruskal = assumptions.kruskal_record(profile, n, settings.confidence)
    rows.append(depth.depth_row(model, layer, "depth", context, kruskal))
    profiles[layer] = assumptions.profile_table(profile, settings.confidence)
    log.info("layer %s: P(n) = %s, Kruskal rank ≈ %s", layer, kruskal["p_n"], profile.estimate)
for layer, kruskal_path, context_path in zip(
    params.detail_layers, inputs.kruskal, inputs.contexts, strict=True
):
    kruskal = json.loads(Path(kruskal_path).read_text())
    context = json.loads(Path(context_path).read_text())
    rows.append(depth.depth_row(model, layer, "detail", context, kruskal))

table = depth.depth_table(rows)
table.to_csv(snakemake.output.table, index=False)
depth.profiles_table(profiles).to_csv(snakemake.output.profiles, index=False)
log.info("depth profile:\n%s", table[list(depth.DEPTH_COLUMNS)].to_string())
save_figure(depth.plot_depth(table, f"{model} · depth profile"), snakemake.output.figure)
