# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: merge the real-data certified capacities into one table and figure."""

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

import pandas as pd  # noqa: E402

from memcap.capacity.figures import plot_real_capacity  # noqa: E402
from memcap.capacity.summary import summarize  # noqa: E402
from memcap.plotting import save_figure  # noqa: E402

real = summarize(pd.read_csv(path) for path in snakemake.input.tables)
real.to_csv(snakemake.output.table, index=False)
save_figure(plot_real_capacity(real), snakemake.output.figure)
log.info("certified capacity of %d model x layer pairs", real.groupby(["model", "layer"]).ngroups)
