"""Synthetic stage: paper A's H / n / d_h sweeps and the certified capacity, synthetic and real.

One job per sweep trains all its replicas as batched models; summarize_synthetic merges them;
certify_real_capacity runs the training-free certified capacity on every extracted
model × layer. Functions: rules/common.smk, synthetic section.
"""

SYNTHETIC_CATEGORY = "Synthetic capacity"


rule run_synthetic_sweep:
    output:
        table="results/synthetic/{sweep}.csv",
        saturation="results/synthetic/{sweep}_saturation.csv",
        provenance="results/synthetic/{sweep}_provenance.json",
    log:
        "logs/run_synthetic_sweep/{sweep}.log",
    benchmark:
        "benchmarks/results/run_synthetic_sweep/{sweep}.tsv"
    wildcard_constraints:
        sweep=synthetic_sweep_pattern(),
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=synthetic_sweep_mem_mb,
        gpu=gpu_request,
    params:
        synthetic=synthetic_section,
        seed=config["seed"],
        device=config["device"],
    script:
        "../workflow/scripts/run_synthetic_sweep.py"


rule summarize_synthetic:
    input:
        tables=synthetic_sweep_tables,
        saturation=synthetic_saturation_tables,
    output:
        summary=report(
            "results/synthetic/summary.csv",
            caption="../workflow/report/synthetic_summary.rst",
            category=SYNTHETIC_CATEGORY,
            subcategory="Tables",
            labels={"table": "every replica"},
        ),
        capacity=report(
            "results/synthetic/capacity.csv",
            caption="../workflow/report/synthetic_capacity.rst",
            category=SYNTHETIC_CATEGORY,
            subcategory="Tables",
            labels={"table": "capacity estimates"},
        ),
        fits=report(
            "results/synthetic/fits.csv",
            caption="../workflow/report/synthetic_fits.rst",
            category=SYNTHETIC_CATEGORY,
            subcategory="Tables",
            labels={"table": "linear fits"},
        ),
        saturation=report(
            "results/synthetic/saturation.csv",
            caption="../workflow/report/synthetic_saturation_table.rst",
            category=SYNTHETIC_CATEGORY,
            subcategory="Tables",
            labels={"table": "softmax saturation"},
        ),
    log:
        "logs/summarize_synthetic/summarize_synthetic.log",
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=1000,
    script:
        "../workflow/scripts/summarize_synthetic.py"


rule plot_synthetic_sweep:
    input:
        capacity="results/synthetic/capacity.csv",
        fits="results/synthetic/fits.csv",
    output:
        figure=report(
            "results/synthetic/memorized_{sweep}.png",
            caption="../workflow/report/synthetic_memorized.rst",
            category=SYNTHETIC_CATEGORY,
            subcategory="Scaling laws",
            labels={"sweep": "{sweep}"},
        ),
    log:
        "logs/plot_synthetic_sweep/{sweep}.log",
    wildcard_constraints:
        sweep=synthetic_sweep_pattern(),
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=1000,
    script:
        "../workflow/scripts/plot_synthetic_sweep.py"


rule plot_synthetic_saturation:
    input:
        saturation=synthetic_saturation_tables,
    output:
        figure=report(
            "results/synthetic/saturation.png",
            caption="../workflow/report/synthetic_saturation.rst",
            category=SYNTHETIC_CATEGORY,
            subcategory="Softmax saturation",
            labels={"figure": "saturation per head"},
        ),
    log:
        "logs/plot_synthetic_saturation/plot_synthetic_saturation.log",
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=1000,
    script:
        "../workflow/scripts/plot_synthetic_saturation.py"


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
        "benchmarks/results/certify_real_capacity/{model}/{layer}.tsv"
    wildcard_constraints:
        model=extract_model_pattern(),
        layer=r"[0-9]+|random_attention",
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=real_capacity_mem_mb,
    params:
        settings=real_capacity_settings,
        seed=config["seed"],
    script:
        "../workflow/scripts/certify_real_capacity.py"


rule summarize_real_capacity:
    input:
        tables=real_capacity_tables,
    output:
        table=report(
            "results/capacity/real.csv",
            caption="../workflow/report/synthetic_real_table.rst",
            category=SYNTHETIC_CATEGORY,
            subcategory="Real embeddings",
            labels={"table": "certified capacity"},
        ),
        figure=report(
            "results/capacity/real.png",
            caption="../workflow/report/synthetic_real_capacity.rst",
            category=SYNTHETIC_CATEGORY,
            subcategory="Real embeddings",
            labels={"figure": "certified capacity"},
        ),
    log:
        "logs/summarize_real_capacity/summarize_real_capacity.log",
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=1000,
    script:
        "../workflow/scripts/summarize_real_capacity.py"
