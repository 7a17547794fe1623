# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: each sweep's laws on its seeds, and the per-head softmax saturation
across the sweeps."""

import pandas as pd

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

from memcap.plotting import save_figure  # noqa: E402
from memcap.synthetic.figures import plot_saturation, plot_sweep  # noqa: E402

capacity = pd.read_csv(snakemake.input.capacity)
for sweep, path in zip(snakemake.params.sweeps, snakemake.output.figures, strict=True):
    save_figure(plot_sweep(capacity, sweep), path)
saturation = pd.concat([pd.read_csv(path) for path in snakemake.input.saturation])
save_figure(plot_saturation(saturation), snakemake.output.saturation)
