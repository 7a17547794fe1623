# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: every stage's outputs in, reports/report.html out."""

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

from memcap.report import ReportInputs, write_report  # noqa: E402
from memcap.report.captions import CaptionRule  # noqa: E402

inputs = ReportInputs(
    config=snakemake.params.config,
    title=snakemake.params.title,
    stages=snakemake.params.stages,
    stage_files={
        stage: list(snakemake.input[stage])
        for stage in ("extract", "assumptions", "synthetic", "capacity", "aot")
    },
    benchmarks=list(snakemake.input.benchmarks),
    rule_stages=snakemake.params.rule_stages,
    captions=[CaptionRule.from_dict(rule) for rule in snakemake.params.caption_rules],
)
context = write_report(inputs, snakemake.input.template, snakemake.output.html)
log.info(
    "wrote %s: %d model x layer checks, %d figures, %d limitations",
    snakemake.output.html,
    len(context.layers),
    context.figure_count,
    len(context.limitations),
)
