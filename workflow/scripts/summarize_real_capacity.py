# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: merge the real-data certified capacities into two tables and a figure."""

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

import pandas as pd  # noqa: E402

from memcap.capacity.figures import plot_real_capacity  # noqa: E402
from memcap.capacity.summary import first_runs, merge, shared_spread  # noqa: E402
from memcap.plotting import save_figure  # noqa: E402

table = merge(pd.read_csv(path) for path in snakemake.params.tables)
spread = shared_spread(table)
real = first_runs(table, spread)
real.to_csv(snakemake.output.table, index=False)
spread.to_csv(snakemake.output.spread, index=False)
save_figure(plot_real_capacity(real, spread), snakemake.output.figure)
log.info("certified capacity of %d model x layer pairs", real.groupby(["model", "layer"]).ngroups)
