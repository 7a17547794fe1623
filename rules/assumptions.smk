"""Assumptions stage: context ranks (Assumption 2) and the Kruskal profile (Assumption 1,
general position) of every layer of a model, then one summary table.

assumptions.cut sets the jobs. model (the default): one check_assumptions job per model (one
interpreter start: importing torch, SciPy, pandas and Matplotlib costs more CPU than a layer's
checks on the default data) reads the model's extraction folder, checks its detail layers in
full and its depth rows with fewer orderings, and writes the model's folder
results/assumptions/{model}/ (memcap.assumptions.job): per detail layer {layer}/ with its
tables, summaries and figures, and the depth profile beside them. layer: one
check_assumption_layer job per (model, layer) into results/assumptions_layers/{model}/{layer}/,
and merge_assumption_layers, on the submit host, writes the same model folder from them. Each
model folder comes from one route: the other's {model} wildcard matches nothing.
summarize_assumptions reads the summaries inside the folders. Functions:
rules/assumptions_functions.smk and rules/common.smk.
"""


include: "assumptions_functions.smk"


# Joining a fine cut's files takes less than a batch job's start: on the submit host.
localrules:
    merge_assumption_layers,


# The random null of every decision, one file per shape, shared by the check jobs
# (memcap.assumptions.null_table): a cache, not a target.
NULL_TABLE = "results/assumptions/null"


rule check_assumptions:
    input:
        extraction="results/extract/{model}",
    output:
        checks=folder_report("results/assumptions/{model}"),
    log:
        "logs/check_assumptions/{model}.log",
    benchmark:
        benchmark_file("check_assumptions")
    wildcard_constraints:
        model=assumptions_model_pattern("model"),
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=assumptions_mem_mb,
        runtime=job_runtime("check_assumptions"),
        gpu=gpu_request,
    params:
        settings=assumptions_settings,
        layers=checked_layers_param,
        detail_layers=detail_layers_param,
        depth_profile=depth_profile_param,
        device=config["device"],
        null_table=NULL_TABLE,
    script:
        "../workflow/scripts/check_assumptions.py"


rule check_assumption_layer:
    input:
        extraction="results/extract/{model}",
    output:
        checks=directory("results/assumptions_layers/{model}/{layer}"),
    log:
        "logs/check_assumption_layer/{model}/{layer}.log",
    benchmark:
        benchmark_file("check_assumption_layer")
    wildcard_constraints:
        model=assumptions_model_pattern("layer"),
        layer=assumptions_layer_pattern(),
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=assumptions_mem_mb,
        runtime=job_runtime("check_assumption_layer"),
        gpu=gpu_request,
    params:
        settings=assumptions_settings,
        detail=assumptions_detail_param,
        device=config["device"],
        null_table=NULL_TABLE,
    script:
        "../workflow/scripts/check_assumption_layer.py"


rule merge_assumption_layers:
    input:
        layers=assumptions_layer_folders,
    output:
        checks=folder_report("results/assumptions/{model}"),
    log:
        "logs/merge_assumption_layers/{model}.log",
    wildcard_constraints:
        model=assumptions_model_pattern("layer"),
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=1000,
    params:
        layers=checked_layers_param,
        depth_profile=depth_profile_param,
    script:
        "../workflow/scripts/merge_assumption_layers.py"


rule summarize_assumptions:
    input:
        checks=assumptions_folders,
    output:
        summary=report(
            "results/assumptions/summary.csv",
            caption="../workflow/report/assumptions_summary.rst",
            category="Assumptions",
            subcategory="Summary",
            labels={"table": "assumptions summary"},
        ),
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
        depth=assumptions_depth_tables,
    script:
        "../workflow/scripts/summarize_assumptions.py"
