"""AoT stage: paper B's attention-only-transformer memorization sweeps.

aot.cut sets the jobs that train every setting x seed as batched models (memcap.aot.sweep):
one train_aot job for every sweep, one after another in one process (the default: the sweeps
are seconds to a minute of CPU each and torch's import costs ~2.5 s a process, docs/aot.md);
one train_aot_sweep job per sweep; or one train_aot_setting job per (sweep, setting) whose
tables merge_aot_settings joins, on the submit host, into the sweep's (memcap.aot.cut). Each
sweep's table comes from exactly one of them: the others' outputs or {sweep} wildcards match
nothing. summarize_aot merges the tables and fits the scaling laws; plot_aot draws every sweep
with chance, both lower bounds and the fit into results/aot/figures/{sweep}.png (one import of
the plotting stack for all sweeps). Functions: rules/aot_functions.smk and rules/common.smk.
"""

AOT_CATEGORY = "Attention-only transformers"


include: "aot_functions.smk"


# Joining a fine cut's files takes less than a batch job's start: on the submit host.
localrules:
    merge_aot_settings,


rule train_aot:
    output:
        tables=expand("results/aot/{sweep}.csv", sweep=aot_cut_sweeps("stage")),
        provenance=expand(
            "results/aot/{sweep}_provenance.json", sweep=aot_cut_sweeps("stage")
        ),
    log:
        "logs/train_aot/train_aot.log",
    benchmark:
        benchmark_file("train_aot")
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=aot_mem_mb,
        runtime=job_runtime("train_aot"),
        gpu=gpu_request,
    params:
        stage=aot_stage,
        specs=aot_sweep_specs,
        engine=config["engine"],
        seed=config["seed"],
        device=config["device"],
    script:
        "../workflow/scripts/train_aot.py"


rule train_aot_sweep:
    output:
        tables=["results/aot/{sweep}.csv"],
        provenance=["results/aot/{sweep}_provenance.json"],
    log:
        "logs/train_aot_sweep/{sweep}.log",
    benchmark:
        benchmark_file("train_aot_sweep")
    wildcard_constraints:
        sweep=aot_sweep_pattern("sweep"),
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=aot_mem_mb,
        runtime=job_runtime("train_aot_sweep"),
        gpu=gpu_request,
    params:
        stage=aot_stage,
        specs=aot_sweep_specs,
        engine=config["engine"],
        seed=config["seed"],
        device=config["device"],
    script:
        "../workflow/scripts/train_aot.py"


rule train_aot_setting:
    output:
        tables=["results/aot/{sweep}/{setting}.csv"],
        provenance=["results/aot/{sweep}/{setting}_provenance.json"],
    log:
        "logs/train_aot_setting/{sweep}/{setting}.log",
    benchmark:
        benchmark_file("train_aot_setting")
    wildcard_constraints:
        sweep=aot_sweep_pattern("setting"),
        setting=aot_setting_pattern(),
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=aot_mem_mb,
        runtime=job_runtime("train_aot_setting"),
        gpu=gpu_request,
    params:
        stage=aot_stage,
        specs=aot_sweep_specs,
        engine=config["engine"],
        seed=config["seed"],
        device=config["device"],
    script:
        "../workflow/scripts/train_aot.py"


rule merge_aot_settings:
    input:
        table=aot_setting_files(".csv"),
        provenance=aot_setting_files("_provenance.json"),
    output:
        table="results/aot/{sweep}.csv",
        provenance="results/aot/{sweep}_provenance.json",
    log:
        "logs/merge_aot_settings/{sweep}.log",
    wildcard_constraints:
        sweep=aot_sweep_pattern("setting"),
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=1000,
    params:
        stage="aot",
        settings=aot_settings_param,
    script:
        "../workflow/scripts/merge_settings.py"


rule summarize_aot:
    input:
        tables=aot_sweep_tables,
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
