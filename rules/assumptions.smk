"""Assumptions stage: context ranks (Assumption 2) and the Kruskal profile (Assumption 1,
general position) of every layer of a model, then one summary table.

check_assumptions checks the layers of one job from its model's extraction folder into the
job's folder results/assumptions/jobs/{job}/ (memcap.assumptions.job): per layer its folder
jobs/{model}/{layer}/, a detail layer's tables, summaries and figures checked in full, every
layer's depth row (depth rows with fewer orderings). assumptions.cut names the jobs
(assumptions_jobs, memcap.assumptions.cut): a model (the default: one interpreter start;
importing torch, SciPy, pandas and Matplotlib costs more CPU than a layer's checks on the
default data), whose folder holds its layers' folders, or one layer of it ("gpt2-tiny/3"),
whose folder is the layer's. summarize_assumptions reads every job's folder: the summary table,
and each depth-profiled model's depth.csv, depth_profiles.csv and depth.png in
results/assumptions/{model}/. Functions: rules/assumptions_functions.smk and rules/common.smk.
"""


include: "assumptions_functions.smk"


# The random null of every decision, one file per shape, shared by the check jobs
# (memcap.assumptions.null_table): a cache, not a target.
NULL_TABLE = "results/assumptions/null"


rule check_assumptions:
    input:
        extraction=assumptions_extraction,
    output:
        checks=assumptions_checks_report(),
    log:
        "logs/check_assumptions/{job}.log",
    benchmark:
        benchmark_file("check_assumptions")
    wildcard_constraints:
        job=assumptions_job_pattern(),
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=assumptions_mem_mb,
        runtime=job_runtime("check_assumptions"),
        gpu=gpu_request,
    params:
        settings=assumptions_settings,
        layers=job_layers_param,
        detail_layers=job_detail_layers_param,
        device=config["device"],
        null_table=NULL_TABLE,
    script:
        "../workflow/scripts/check_assumptions.py"


rule summarize_assumptions:
    input:
        checks=assumptions_job_folders,
    output:
        summary=report(
            "results/assumptions/summary.csv",
            caption="../workflow/report/assumptions_summary.rst",
            category="Assumptions",
            subcategory="Summary",
            labels={"table": "assumptions summary"},
        ),
        depth=assumptions_depth_files("depth.csv"),
        profiles=assumptions_depth_files("depth_profiles.csv"),
        figures=assumptions_depth_figures(),
    log:
        "logs/summarize_assumptions/summarize_assumptions.log",
    group:
        REPORT_GROUP
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=1000,
    params:
        kruskal=assumptions_kruskal_jsons,
        contexts=assumptions_context_jsons,
        depth_models=assumptions_depth_models,
        depth_layers=assumptions_depth_layers,
    script:
        "../workflow/scripts/summarize_assumptions.py"
