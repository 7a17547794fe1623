# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: merge the AoT sweep tables, fit the scaling laws, check paper B's findings."""

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

import pandas as pd  # noqa: E402

from memcap.aot.laws import law_table  # noqa: E402
from memcap.aot.summary import fit_table, summarize  # noqa: E402

summary = summarize(pd.read_csv(path) for path in snakemake.input.tables)
fits = fit_table(summary)
summary.to_csv(snakemake.output.summary, index=False)
fits.to_csv(snakemake.output.fits, index=False)
laws = law_table(summary)
laws.to_csv(snakemake.output.laws, index=False)
log.info("%d rows; fits:\n%s", len(summary), fits.to_string(index=False))
log.info("findings:\n%s", laws.to_string(index=False))
