# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: draw one AoT sweep with chance, both lower bounds and the fit."""

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

import pandas as pd  # noqa: E402

from memcap.aot.figures import plot_sweep  # noqa: E402
from memcap.plotting import save_figure  # noqa: E402

summary = pd.read_csv(snakemake.input.summary)
rows = summary[summary["sweep"] == snakemake.wildcards.sweep]
save_figure(plot_sweep(rows), snakemake.output.figure)
log.info("plotted %d rows of sweep %s", len(rows), snakemake.wildcards.sweep)
