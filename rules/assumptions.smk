"""Assumptions stage: context ranks (Assumption 2) and the Kruskal profile (Assumption 1,
general position) of every layer of a model, then one summary table.

One check_assumptions job per model (one interpreter start: importing torch, SciPy, pandas and
Matplotlib costs more CPU than a layer's checks on the default data) checks its detail layers
in full and its depth rows with fewer orderings, into a temporary folder; take_layer_checks and
take_depth_profile move each layer's files and the depth profile to their paths under
results/assumptions/{model}/ (no copy, no interpreter start). Functions:
rules/assumptions_functions.smk and rules/common.smk.
"""


include: "assumptions_functions.smk"


# The random null of every decision, one file per shape, shared by the check jobs
# (memcap.assumptions.null_table): a cache, not a target.
NULL_TABLE = "results/assumptions/null"


rule check_assumptions:
    input:
        queries=extract_layer_files("queries.npy", checked_layers),
        context_ranks=extract_layer_files("context_ranks.npz", checked_layers),
        provenance=extract_layer_files("provenance.json", checked_layers),
        contexts=extract_layer_files("contexts.npy", model_detail_layers),
    output:
        checks=temp(directory("results/assumptions/{model}/checks")),
    log:
        "logs/check_assumptions/{model}.log",
    benchmark:
        benchmark_file("check_assumptions")
    wildcard_constraints:
        model=extract_model_pattern(),
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=assumptions_mem_mb,
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


rule take_layer_checks:
    input:
        checks="results/assumptions/{model}/checks",
    output:
        context_table="results/assumptions/{model}/{layer}/context_rank.csv",
        context_summary="results/assumptions/{model}/{layer}/context_rank.json",
        context_figure=figure_report("context_rank"),
        profile_table="results/assumptions/{model}/{layer}/kruskal_profile.csv",
        profile_summary="results/assumptions/{model}/{layer}/kruskal.json",
        profile_figure=figure_report("kruskal_profile"),
        failures="results/assumptions/{model}/{layer}/failures.csv",
    log:
        "logs/take_layer_checks/{model}/{layer}.log",
    wildcard_constraints:
        model=extract_model_pattern(),
        layer=LAYER_PATTERN,
    localrule: True
    run:
        take_layer(input.checks, wildcards.layer, output)


rule take_depth_profile:
    input:
        checks="results/assumptions/{model}/checks",
    output:
        table="results/assumptions/{model}/depth.csv",
        profiles="results/assumptions/{model}/depth_profiles.csv",
        figure=figure_report("depth_profile"),
    log:
        "logs/take_depth_profile/{model}.log",
    wildcard_constraints:
        model=extract_model_pattern(),
    localrule: True
    run:
        take_layer(input.checks, "depth", output)


rule summarize_assumptions:
    input:
        kruskal=assumptions_kruskal_jsons,
        contexts=assumptions_context_jsons,
        depth=assumptions_depth_tables,
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
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=1000,
    script:
        "../workflow/scripts/summarize_assumptions.py"
