"""Capacity stage: the training-free certified capacity on real embeddings.

One certify_real_capacity job per model reads the model's extraction folder, computes the
singular values of Z with random attention for H = 1 ... max_H on each of its detail layers,
own contexts and every shared context x attention draw, and reads their ranks against the
layer's measured forward error (memcap.capacity) into the model's folder
results/capacity/{model}/ ({layer}.csv and {layer}_provenance.json per layer);
summarize_real_capacity merges the tables (real.csv, shared_spread.csv) and draws them against
Theorem 1's min(T, H(n-1)+1). Functions: rules/capacity_functions.smk and rules/common.smk.
"""

CAPACITY_CATEGORY = "Certified capacity"


include: "capacity_functions.smk"


rule certify_real_capacity:
    input:
        extraction="results/extract/{model}",
    output:
        tables=directory("results/capacity/{model}"),
    log:
        "logs/certify_real_capacity/{model}.log",
    benchmark:
        benchmark_file("certify_real_capacity")
    wildcard_constraints:
        model=extract_model_pattern(),
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=capacity_mem_mb,
        runtime=job_runtime("certify_real_capacity"),
    params:
        section=capacity_section,
        layers=detail_layers_param,
        seed=config["seed"],
    script:
        "../workflow/scripts/certify_real_capacity.py"


rule summarize_real_capacity:
    input:
        folders=capacity_folders,
    output:
        table=report(
            "results/capacity/real.csv",
            caption="../workflow/report/capacity_real_table.rst",
            category=CAPACITY_CATEGORY,
            subcategory="Real embeddings",
            labels={"table": "certified capacity"},
        ),
        spread=report(
            "results/capacity/shared_spread.csv",
            caption="../workflow/report/capacity_spread_table.rst",
            category=CAPACITY_CATEGORY,
            subcategory="Real embeddings",
            labels={"table": "shared-context spread"},
        ),
        figure=figure_report("capacity_real"),
    log:
        "logs/summarize_real_capacity/summarize_real_capacity.log",
    group:
        REPORT_GROUP
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=1000,
    params:
        tables=capacity_tables,
    script:
        "../workflow/scripts/summarize_real_capacity.py"
