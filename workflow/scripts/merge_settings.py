# ruff: noqa: F821 - `snakemake` is injected by Snakemake
"""Snakemake adapter: a sweep's per-setting tables joined into the sweep's, in setting order,
and one provenance record holding every setting's (memcap.cluster.merge)."""

from memcap.logs import setup_logging

log = setup_logging(snakemake.log[0])

from memcap.cluster.merge import concat_tables, merge_provenance  # noqa: E402

outputs = snakemake.output
for name, out in outputs.items():
    if name != "provenance":
        rows = concat_tables(snakemake.input[name], out)
        log.info("%s: %d rows from %d settings", out, rows, len(snakemake.input[name]))
merge_provenance(
    dict(zip(snakemake.params.settings, snakemake.input.provenance, strict=True)),
    outputs.provenance,
    stage=snakemake.params.stage,
    sweep=snakemake.wildcards.sweep,
    cut="setting",
)
