"""AoT stage: paper B's attention-only-transformer memorization sweeps.

One job trains every sweep, each setting x seed as batched models (memcap.aot.sweep), in one
process: the sweeps are seconds to a minute of CPU each and torch's import costs ~2.5 s a
process (docs/aot.md, "Speed"); editing any sweep reruns the job.
summarize_aot merges the tables and fits the scaling laws; plot_aot draws every sweep with
chance, both lower bounds and the fit into results/aot/figures/{sweep}.png (one import of the
plotting stack for all sweeps). Functions: rules/aot_functions.smk and rules/common.smk.
"""

AOT_CATEGORY = "Attention-only transformers"


include: "aot_functions.smk"


rule train_aot:
    output:
        tables=expand("results/aot/{sweep}.csv", sweep=aot_sweeps()),
        provenance=expand("results/aot/{sweep}_provenance.json", sweep=aot_sweeps()),
    log:
        "logs/train_aot/train_aot.log",
    benchmark:
        benchmark_file("train_aot")
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=aot_mem_mb,
        gpu=gpu_request,
    params:
        stage=aot_stage,
        specs=aot_sweep_specs,
        engine=config["engine"],
        seed=config["seed"],
        device=config["device"],
    script:
        "../workflow/scripts/train_aot.py"


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
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=1000,
    script:
        "../workflow/scripts/plot_aot.py"
