"""AoT stage: paper B's attention-only-transformer memorization sweeps.

train_aot trains every setting x seed of one job as batched models (memcap.aot.sweep) into
results/aot/jobs/{job}.csv and {job}_provenance.json. aot.cut names the jobs (aot_jobs,
memcap.aot.cut): "all", one job for every sweep, one after another in one process (the
default: the sweeps are seconds to a minute of CPU each and torch's import costs ~2.5 s a
process, docs/aot.md); a sweep ("heads"); or one setting of it ("heads/aot_H6"), listed in the
order of the sweeps' table rows. summarize_aot reads every job's table, merges them and fits
the scaling laws; plot_aot draws every sweep with chance, both lower bounds and the fit into
results/aot/figures/{sweep}.png (one import of the plotting stack for all sweeps). Functions:
rules/aot_functions.smk and rules/common.smk.
"""

AOT_CATEGORY = "Attention-only transformers"


include: "aot_functions.smk"


rule train_aot:
    output:
        table="results/aot/jobs/{job}.csv",
        provenance="results/aot/jobs/{job}_provenance.json",
    log:
        "logs/train_aot/{job}.log",
    benchmark:
        benchmark_file("train_aot")
    wildcard_constraints:
        job=aot_job_pattern(),
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=aot_mem_mb,
        runtime=job_runtime("train_aot"),
        gpu=gpu_request,
    params:
        stage=aot_stage,
        specs=aot_job_specs,
        engine=config["engine"],
        seed=config["seed"],
        device=config["device"],
    script:
        "../workflow/scripts/train_aot.py"


rule summarize_aot:
    input:
        tables=aot_job_tables,
    output:
        summary=report(
            "results/aot/summary.csv",
            caption="../workflow/report/aot_summary.rst",
            category=AOT_CATEGORY,
            subcategory="Tables",
            labels={"table": "summary"},
        ),
        fits=report(
            "results/aot/fits.csv",
            caption="../workflow/report/aot_fits.rst",
            category=AOT_CATEGORY,
            subcategory="Tables",
            labels={"table": "fits"},
        ),
        laws=report(
            "results/aot/laws.csv",
            caption="../workflow/report/aot_laws.rst",
            category=AOT_CATEGORY,
            subcategory="Tables",
            labels={"table": "findings checked"},
        ),
    log:
        "logs/summarize_aot/summarize_aot.log",
    group:
        REPORT_GROUP
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=1000,
    script:
        "../workflow/scripts/summarize_aot.py"


rule plot_aot:
    input:
        summary="results/aot/summary.csv",
    output:
        figures=folder_report("results/aot/figures"),
    log:
        "logs/plot_aot/plot_aot.log",
    group:
        REPORT_GROUP
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=1000,
    script:
        "../workflow/scripts/plot_aot.py"
