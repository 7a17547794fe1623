"""Capacity stage: the training-free certified capacity on real embeddings.

One certify_real_capacity job per model computes the singular values of Z with random attention
for H = 1 ... max_H on each of its detail layers, own contexts and every shared context x
attention draw, and reads their ranks against the layer's measured forward error
(memcap.capacity) into a temporary folder; take_layer_capacity moves each layer's table to
results/capacity/{model}/{layer}.csv (no interpreter start); summarize_real_capacity merges the
tables (real.csv, shared_spread.csv) and draws them against Theorem 1's min(T, H(n-1)+1).
Functions: rules/capacity_functions.smk and rules/common.smk.
"""

CAPACITY_CATEGORY = "Certified capacity"


include: "capacity_functions.smk"


rule certify_real_capacity:
    input:
        queries=extract_layer_files("queries.npy", model_detail_layers),
        contexts=extract_layer_files("contexts.npy", model_detail_layers),
        provenance=extract_layer_files("provenance.json", model_detail_layers),
    output:
        tables=temp(directory("results/capacity/{model}/certified")),
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
    params:
        section=capacity_section,
        layers=detail_layers_param,
        seed=config["seed"],
    script:
        "../workflow/scripts/certify_real_capacity.py"


rule take_layer_capacity:
    input:
        tables="results/capacity/{model}/certified",
    output:
        table="results/capacity/{model}/{layer}.csv",
        provenance="results/capacity/{model}/{layer}_provenance.json",
    log:
        "logs/take_layer_capacity/{model}/{layer}.log",
    wildcard_constraints:
        model=extract_model_pattern(),
        layer=LAYER_PATTERN,
    localrule: True
    run:
        take_layer(input.tables, wildcards.layer, output)


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
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=1000,
    script:
        "../workflow/scripts/summarize_real_capacity.py"
