"""Assumptions stage: context ranks (Assumption 2), Kruskal profile (Assumption 1, general
position) of every extracted model x layer, and one summary table.

Its functions (targets, params, memory) live in the assumptions section of rules/common.smk.
"""


rule check_context_rank:
    input:
        contexts="results/extract/{model}/{layer}/contexts.npy",
        provenance="results/extract/{model}/{layer}/provenance.json",
    output:
        table="results/assumptions/{model}/{layer}/context_rank.csv",
        summary="results/assumptions/{model}/{layer}/context_rank.json",
        figure=report(
            "results/assumptions/{model}/{layer}/context_rank.png",
            caption="../workflow/report/assumptions_context_rank.rst",
            category="Assumptions",
            subcategory="{model}",
            labels={"model": "{model}", "layer": "{layer}", "figure": "context ranks"},
        ),
    log:
        "logs/check_context_rank/{model}/{layer}.log",
    benchmark:
        "benchmarks/results/check_context_rank/{model}/{layer}.tsv"
    wildcard_constraints:
        model=extract_model_pattern(),
        layer=r"[0-9]+|random_attention",
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=context_rank_mem_mb,
        gpu=gpu_request,
    params:
        settings=assumptions_settings,
        device=config["device"],
    script:
        "../workflow/scripts/check_context_rank.py"


rule estimate_kruskal_profile:
    input:
        queries="results/extract/{model}/{layer}/queries.npy",
        provenance="results/extract/{model}/{layer}/provenance.json",
    output:
        table="results/assumptions/{model}/{layer}/kruskal_profile.csv",
        summary="results/assumptions/{model}/{layer}/kruskal.json",
        figure=report(
            "results/assumptions/{model}/{layer}/kruskal_profile.png",
            caption="../workflow/report/assumptions_kruskal_profile.rst",
            category="Assumptions",
            subcategory="{model}",
            labels={"model": "{model}", "layer": "{layer}", "figure": "P(k) profile"},
        ),
    log:
        "logs/estimate_kruskal_profile/{model}/{layer}.log",
    benchmark:
        "benchmarks/results/estimate_kruskal_profile/{model}/{layer}.tsv"
    wildcard_constraints:
        model=extract_model_pattern(),
        layer=r"[0-9]+|random_attention",
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=kruskal_mem_mb,
        gpu=gpu_request,
    params:
        settings=assumptions_settings,
        device=config["device"],
    script:
        "../workflow/scripts/estimate_kruskal_profile.py"


rule summarize_assumptions:
    input:
        kruskal=assumptions_kruskal_jsons,
        contexts=assumptions_context_jsons,
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
        mem_mb=ASSUMPTIONS_BASE_MB,
    script:
        "../workflow/scripts/summarize_assumptions.py"
