"""Synthetic stage: paper A's H / n / d_h sweeps with their certified capacities.

train_synthetic trains and certifies the replicas of one job as batched models
(memcap.synthetic) into results/synthetic/jobs/{job}.csv, {job}_saturation.csv and
{job}_provenance.json. synthetic.cut names the jobs (synthetic_jobs, memcap.synthetic.cut): a
sweep ("heads"), or one setting of it ("heads/H5_shared"), listed in the order of the sweeps'
table rows. summarize_synthetic reads every job's tables, merges the sweeps and fits the
scaling laws; plot_synthetic draws one figure per sweep and one of the softmax saturation (one
import of the plotting stack for all). Functions: rules/synthetic_functions.smk and
rules/common.smk.
"""

SYNTHETIC_CATEGORY = "Synthetic capacity"


include: "synthetic_functions.smk"


rule train_synthetic:
    output:
        table="results/synthetic/jobs/{job}.csv",
        saturation="results/synthetic/jobs/{job}_saturation.csv",
        provenance="results/synthetic/jobs/{job}_provenance.json",
    log:
        "logs/train_synthetic/{job}.log",
    benchmark:
        benchmark_file("train_synthetic")
    wildcard_constraints:
        job=synthetic_job_pattern(),
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=synthetic_mem_mb,
        runtime=job_runtime("train_synthetic"),
        gpu=gpu_request,
    params:
        section=synthetic_section,
        engine=config["engine"],
        seed=config["seed"],
        device=config["device"],
    script:
        "../workflow/scripts/train_synthetic.py"


rule summarize_synthetic:
    input:
        tables=synthetic_job_files(".csv"),
        saturation=synthetic_job_files("_saturation.csv"),
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
        saturation=synthetic_job_files("_saturation.csv"),
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
