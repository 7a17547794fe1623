# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: merge the real-data certified capacities into one table and figure."""

import pandas as pd

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

from memcap.plotting import save_figure  # noqa: E402
from memcap.synthetic_plots import plot_real_capacity  # noqa: E402

real = pd.concat([pd.read_csv(path) for path in snakemake.input.tables], ignore_index=True)
first = ["model", "layer", "H", "certified", "T", "n", "d", "d_h", "bound"]
real = real[first + [c for c in real.columns if c not in first]]
real.to_csv(snakemake.output.table, index=False)
save_figure(plot_real_capacity(real), snakemake.output.figure)
log.info("certified capacity of %d model x layer pairs", real.groupby(["model", "layer"]).ngroups)
