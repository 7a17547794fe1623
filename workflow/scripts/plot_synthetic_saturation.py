# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: figure of per-head softmax saturation across the sweeps."""

import pandas as pd

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

from memcap.plotting import save_figure  # noqa: E402
from memcap.synthetic.figures import plot_saturation  # noqa: E402

saturation = pd.concat([pd.read_csv(path) for path in snakemake.input.saturation])
save_figure(plot_saturation(saturation), snakemake.output.figure)
