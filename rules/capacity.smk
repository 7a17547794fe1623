"""Capacity stage: the training-free certified capacity on real embeddings.

certify_real_capacity computes rank(Z) with random attention for H = 1 ... max_heads on every
extracted model x layer (memcap.capacity); summarize_real_capacity merges the tables and draws
them against Theorem 1's H(n-1)+1. Functions: rules/common.smk, capacity section.
"""

CAPACITY_CATEGORY = "Certified capacity"


rule certify_real_capacity:
    input:
        queries="results/extract/{model}/{layer}/queries.npy",
        contexts="results/extract/{model}/{layer}/contexts.npy",
    output:
        table="results/capacity/{model}/{layer}.csv",
        provenance="results/capacity/{model}/{layer}_provenance.json",
    log:
        "logs/certify_real_capacity/{model}/{layer}.log",
    benchmark:
        benchmark_file("certify_real_capacity")
    wildcard_constraints:
        model=extract_model_pattern(),
        layer=r"[0-9]+|random_attention",
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=capacity_mem_mb,
    params:
        section=capacity_section,
        seed=config["seed"],
    script:
        "../workflow/scripts/certify_real_capacity.py"


rule summarize_real_capacity:
    input:
        tables=capacity_tables,
    output:
        table=report(
            "results/capacity/real.csv",
            caption="../workflow/report/capacity_real_table.rst",
            category=CAPACITY_CATEGORY,
            subcategory="Real embeddings",
            labels={"table": "certified capacity"},
        ),
        figure=figure_report("capacity_real"),
    log:
        "logs/summarize_real_capacity/summarize_real_capacity.log",
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=1000,
    script:
        "../workflow/scripts/summarize_real_capacity.py"
