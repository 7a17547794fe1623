"""Assumptions stage: context ranks (Assumption 2) and the Kruskal profile (Assumption 1,
general position) of every detail layer (check_assumptions), the depth profile of every model
with one (profile_depth: its depth rows' checks with fewer orderings, beside its detail
layers), then one summary table.

Both checks of a model x layer run in one job: importing torch, scipy and matplotlib costs
more CPU than either check on the default data. Functions (targets, params, memory) live in
the assumptions section of rules/common.smk.
"""


rule check_assumptions:
    input:
        queries="results/extract/{model}/{layer}/queries.npy",
        context_ranks="results/extract/{model}/{layer}/context_ranks.npz",
        provenance="results/extract/{model}/{layer}/provenance.json",
    output:
        context_table="results/assumptions/{model}/{layer}/context_rank.csv",
        context_summary="results/assumptions/{model}/{layer}/context_rank.json",
        context_figure=figure_report("context_rank"),
        profile_table="results/assumptions/{model}/{layer}/kruskal_profile.csv",
        profile_summary="results/assumptions/{model}/{layer}/kruskal.json",
        profile_figure=figure_report("kruskal_profile"),
    log:
        "logs/check_assumptions/{model}/{layer}.log",
    benchmark:
        benchmark_file("check_assumptions")
    wildcard_constraints:
        model=extract_model_pattern(),
        layer=r"[0-9]+|random_attention",
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=assumptions_mem_mb,
        gpu=gpu_request,
    params:
        settings=assumptions_settings,
        device=config["device"],
    script:
        "../workflow/scripts/check_assumptions.py"


rule profile_depth:
    input:
        queries=depth_row_files("queries.npy"),
        context_ranks=depth_row_files("context_ranks.npz"),
        provenance=depth_row_files("provenance.json"),
        kruskal=detail_layer_files("kruskal.json"),
        contexts=detail_layer_files("context_rank.json"),
    output:
        table="results/assumptions/{model}/depth.csv",
        profiles="results/assumptions/{model}/depth_profiles.csv",
        figure=figure_report("depth_profile"),
    log:
        "logs/profile_depth/{model}.log",
    benchmark:
        benchmark_file("profile_depth")
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
        depth_rows=depth_rows_param,
        detail_layers=detail_layers_param,
        device=config["device"],
    script:
        "../workflow/scripts/profile_depth.py"


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
