# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: merge every model's layer tables into the stage's capacity, estimate,
law and paired tables, and draw one figure per model."""

from pathlib import Path

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

import pandas as pd  # noqa: E402

from memcap.plotting import save_figure  # noqa: E402
from memcap.real_memorization import summary  # noqa: E402
from memcap.real_memorization.figures import plot_model  # noqa: E402

tables = [
    pd.read_csv(Path(folder) / f"{layer}.csv")
    for folder, layers in zip(snakemake.input.folders, snakemake.params.layers, strict=True)
    for layer in layers
]
capacity = pd.concat(tables, ignore_index=True)
capacity.to_csv(snakemake.output.capacity, index=False)
summary.estimates(capacity).to_csv(snakemake.output.estimates, index=False)
laws = summary.laws(capacity)
laws.to_csv(snakemake.output.laws, index=False)
paired = summary.paired(capacity)
paired.to_csv(snakemake.output.paired, index=False)
figures = Path(snakemake.output.figures)
figures.mkdir(parents=True)
for model in capacity["model"].unique():
    save_figure(plot_model(capacity, model), figures / f"{model}.png")
log.info("laws:\n%s", laws.to_string(index=False))
log.info("real against the controls:\n%s", paired.to_string(index=False))
