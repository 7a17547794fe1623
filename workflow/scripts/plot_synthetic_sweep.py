# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: figure of memorized examples against one sweep's parameter."""

import pandas as pd

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

from memcap.plotting import save_figure  # noqa: E402
from memcap.synthetic.figures import plot_sweep  # noqa: E402

capacity = pd.read_csv(snakemake.input.capacity)
fits = pd.read_csv(snakemake.input.fits)
save_figure(plot_sweep(capacity, fits, snakemake.wildcards.sweep), snakemake.output.figure)
