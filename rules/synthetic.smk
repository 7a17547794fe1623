"""Synthetic stage: paper A's H / n / d_h sweeps with their certified capacities.

synthetic.cut sets the jobs that train and certify the replicas as batched models
(memcap.synthetic): one run_synthetic_sweep job per sweep, or one run_synthetic_setting job
per (sweep, value, context) whose tables merge_synthetic_settings joins, on the submit host,
into the sweep's (memcap.synthetic.cut). Each sweep's tables come from exactly one of the
two routes: the other's {sweep} wildcard matches nothing. summarize_synthetic merges the
sweeps and fits the scaling laws; plot_synthetic draws one figure per sweep and one of the
softmax saturation (one import of the plotting stack for all). Functions:
rules/synthetic_functions.smk and rules/common.smk.
"""

SYNTHETIC_CATEGORY = "Synthetic capacity"


include: "synthetic_functions.smk"


# Joining a fine cut's files takes less than a batch job's start: on the submit host.
localrules:
    merge_synthetic_settings,


rule run_synthetic_sweep:
    output:
        table="results/synthetic/{sweep}.csv",
        saturation="results/synthetic/{sweep}_saturation.csv",
        provenance="results/synthetic/{sweep}_provenance.json",
    log:
        "logs/run_synthetic_sweep/{sweep}.log",
    benchmark:
        benchmark_file("run_synthetic_sweep")
    wildcard_constraints:
        sweep=synthetic_sweep_pattern("sweep"),
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=synthetic_mem_mb,
        runtime=job_runtime("run_synthetic_sweep"),
        gpu=gpu_request,
    params:
        section=synthetic_section,
        engine=config["engine"],
        seed=config["seed"],
        device=config["device"],
    script:
        "../workflow/scripts/run_synthetic_sweep.py"


rule run_synthetic_setting:
    output:
        table="results/synthetic/{sweep}/{setting}.csv",
        saturation="results/synthetic/{sweep}/{setting}_saturation.csv",
        provenance="results/synthetic/{sweep}/{setting}_provenance.json",
    log:
        "logs/run_synthetic_setting/{sweep}/{setting}.log",
    benchmark:
        benchmark_file("run_synthetic_setting")
    wildcard_constraints:
        sweep=synthetic_sweep_pattern("setting"),
        setting=synthetic_setting_pattern(),
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=synthetic_mem_mb,
        runtime=job_runtime("run_synthetic_setting"),
        gpu=gpu_request,
    params:
        section=synthetic_section,
        engine=config["engine"],
        seed=config["seed"],
        device=config["device"],
    script:
        "../workflow/scripts/run_synthetic_sweep.py"


rule merge_synthetic_settings:
    input:
        table=synthetic_setting_files(".csv"),
        saturation=synthetic_setting_files("_saturation.csv"),
        provenance=synthetic_setting_files("_provenance.json"),
    output:
        table="results/synthetic/{sweep}.csv",
        saturation="results/synthetic/{sweep}_saturation.csv",
        provenance="results/synthetic/{sweep}_provenance.json",
    log:
        "logs/merge_synthetic_settings/{sweep}.log",
    wildcard_constraints:
        sweep=synthetic_sweep_pattern("setting"),
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=1000,
    params:
        stage="synthetic",
        settings=synthetic_settings_param,
    script:
        "../workflow/scripts/merge_settings.py"


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
        estimates=report(
            "results/synthetic/estimates.csv",
            caption="../workflow/report/synthetic_estimates.rst",
            category=SYNTHETIC_CATEGORY,
            subcategory="Tables",
            labels={"table": "capacity per setting"},
        ),
        fits=report(
            "results/synthetic/fits.csv",
            caption="../workflow/report/synthetic_fits.rst",
            category=SYNTHETIC_CATEGORY,
            subcategory="Tables",
            labels={"table": "linear fits"},
        ),
        laws=report(
            "results/synthetic/laws.csv",
            caption="../workflow/report/synthetic_laws.rst",
            category=SYNTHETIC_CATEGORY,
            subcategory="Tables",
            labels={"table": "laws checked"},
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
    group:
        REPORT_GROUP
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=1000,
    script:
        "../workflow/scripts/summarize_synthetic.py"


rule plot_synthetic:
    input:
        capacity="results/synthetic/capacity.csv",
        saturation=synthetic_saturation_tables,
    output:
        figures=synthetic_figures(),
        saturation=figure_report("synthetic_saturation"),
    log:
        "logs/plot_synthetic/plot_synthetic.log",
    group:
        REPORT_GROUP
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=1000,
    params:
        sweeps=synthetic_sweeps_param,
    script:
        "../workflow/scripts/plot_synthetic.py"
