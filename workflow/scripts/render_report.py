# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: every stage's outputs in, reports/report.html out."""

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

from memcap.report import ReportInputs, write_report  # noqa: E402

inputs = ReportInputs.from_layout(
    snakemake.params.layout,
    config=snakemake.params.config,
    title=snakemake.params.title,
    stages=snakemake.params.stages,
)
context = write_report(inputs, snakemake.input.template, snakemake.output.html)
log.info(
    "wrote %s: %d model x layer checks, %d figures, %d limitations",
    snakemake.output.html,
    len(context.layers),
    context.figure_count,
    len(context.limitations),
)
