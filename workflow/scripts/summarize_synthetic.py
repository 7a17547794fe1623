# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: merge the sweeps into summary, capacity, estimate, fit, law and
saturation tables."""

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

import pandas as pd  # noqa: E402

from memcap.synthetic.laws import law_table  # noqa: E402
from memcap.synthetic.summary import (  # noqa: E402
    capacity_table,
    describe_fits,
    estimate_table,
    fit_table,
    saturation_table,
    summarize,
)

summary = summarize(pd.read_csv(path) for path in snakemake.input.tables)
saturation = pd.concat([pd.read_csv(path) for path in snakemake.input.saturation])
capacity = capacity_table(summary)
fits = fit_table(capacity)
summary.to_csv(snakemake.output.summary, index=False)
capacity.to_csv(snakemake.output.capacity, index=False)
estimate_table(capacity).to_csv(snakemake.output.estimates, index=False)
fits.to_csv(snakemake.output.fits, index=False)
laws = law_table(capacity)
laws.to_csv(snakemake.output.laws, index=False)
saturation_table(saturation).to_csv(snakemake.output.saturation, index=False)
log.info("%d replicas, %d settings; fits:\n%s", len(summary), len(capacity), describe_fits(fits))
log.info("laws:\n%s", laws.to_string(index=False))
