from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "config.yaml"


validate(config, workflow.source_path("workflow/schemas/config.schema.yaml"))


report: "workflow/report/workflow.rst"


include: "rules/common.smk"
include: "rules/extract.smk"
include: "rules/assumptions.smk"
include: "rules/synthetic.smk"
include: "rules/aot.smk"
include: "rules/report.smk"


rule all:
    default_target: True
    input:
        all_targets,
