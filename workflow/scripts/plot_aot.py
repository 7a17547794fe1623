# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: draw every AoT sweep with chance, both lower bounds and the fit."""

from pathlib import Path

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

import pandas as pd  # noqa: E402

from memcap.aot.figures import plot_sweep  # noqa: E402
from memcap.plotting import save_figure  # noqa: E402

summary = pd.read_csv(snakemake.input.summary)
folder = Path(snakemake.output.figures)
folder.mkdir(parents=True, exist_ok=True)
for sweep, rows in summary.groupby("sweep", sort=False):
    save_figure(plot_sweep(rows), folder / f"{sweep}.png")
    log.info("plotted %d rows of sweep %s", len(rows), sweep)
