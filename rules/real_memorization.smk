"""Real-memorization stage: paper A's attention layer trained on frozen real embeddings.

train_real_memorization trains, for each listed layer of one model, the synthetic stage's
model through its protocol (memcap.real_memorization, memcap.synthetic.sweep) on the layer's
examples and on i.i.d. controls of the same shape, into the model's folder
results/real_memorization/{model}/ ({layer}.csv, {layer}_replicas.csv and
{layer}_provenance.json per layer); summarize_real_memorization merges the layers, decides
linear in H, pairs real with the controls and draws one figure per model. Functions:
rules/real_memorization_functions.smk and rules/common.smk.
"""

REAL_MEMORIZATION_CATEGORY = "Memorization on real embeddings"


include: "real_memorization_functions.smk"


rule train_real_memorization:
    input:
        extraction="results/extract/{model}",
    output:
        tables=directory("results/real_memorization/{model}"),
    log:
        "logs/train_real_memorization/{model}.log",
    benchmark:
        benchmark_file("train_real_memorization")
    wildcard_constraints:
        model=real_memorization_model_pattern(),
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=real_memorization_mem_mb,
        runtime=job_runtime("train_real_memorization"),
        gpu=gpu_request,
    params:
        section=config["real_memorization"],
        synthetic=config["synthetic"],
        engine=config["engine"],
        seed=config["seed"],
        device=config["device"],
        layers=real_memorization_layers_param,
    script:
        "../workflow/scripts/train_real_memorization.py"


rule summarize_real_memorization:
    input:
        folders=real_memorization_folders,
    output:
        capacity=report(
            "results/real_memorization/capacity.csv",
            caption="../workflow/report/real_memorization_capacity.rst",
            category=REAL_MEMORIZATION_CATEGORY,
            subcategory="Tables",
            labels={"table": "every seed"},
        ),
        estimates=report(
            "results/real_memorization/estimates.csv",
            caption="../workflow/report/real_memorization_estimates.rst",
            category=REAL_MEMORIZATION_CATEGORY,
            subcategory="Tables",
            labels={"table": "per setting"},
        ),
        laws=report(
            "results/real_memorization/laws.csv",
            caption="../workflow/report/real_memorization_laws.rst",
            category=REAL_MEMORIZATION_CATEGORY,
            subcategory="Tables",
            labels={"table": "linear in H"},
        ),
        paired=report(
            "results/real_memorization/paired.csv",
            caption="../workflow/report/real_memorization_paired.rst",
            category=REAL_MEMORIZATION_CATEGORY,
            subcategory="Tables",
            labels={"table": "real against the controls"},
        ),
        figures=folder_report("results/real_memorization/figures"),
    log:
        "logs/summarize_real_memorization/summarize_real_memorization.log",
    group:
        REPORT_GROUP
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=1000,
    params:
        layers=real_memorization_layer_lists,
    script:
        "../workflow/scripts/summarize_real_memorization.py"
