from snakemake.utils import min_version

min_version("9.0")


# A --configfile from the command line replaces the default run instead of being merged
# into it (merging would keep the default's extra models and sweeps); --config still extends.
if not workflow.overwrite_configfiles:

    configfile: "config.yaml"


report: "workflow/report/workflow.rst"


include: "rules/common.smk"
include: "rules/extract.smk"
include: "rules/assumptions.smk"
include: "rules/synthetic.smk"
include: "rules/capacity.smk"
include: "rules/real_memorization.smk"
include: "rules/aot.smk"
include: "rules/report.smk"


rule all:
    default_target: True
    input:
        all_targets,
