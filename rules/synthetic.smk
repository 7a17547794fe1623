"""Synthetic stage: paper A's H / n / d_h sweeps and the certified capacity, synthetic and real.

One job per sweep trains all its replicas as batched models; summarize_synthetic merges them;
certify_real_capacity runs the training-free certified capacity on every extracted
model × layer (needs the extract stage's extract_models() and model_layers()).
"""

from memcap.synthetic_config import SWEEPS, enabled_sweeps

SYNTHETIC_CATEGORY = "Synthetic capacity"
# Resident memory of a sweep job besides its tensors: interpreter, torch, pandas.
SYNTHETIC_BASE_MB = 1500
# float32 values held per example and context token (data, activations, gradients).
SYNTHETIC_FLOATS_PER_TOKEN = 24
# Peak memory of certify_real_capacity for T <= 1024, n <= 512, d <= 1024.
REAL_CAPACITY_MB = 4000


def synthetic_sweeps():
    """The {sweep} wildcard values the config switches on."""
    return enabled_sweeps(config["synthetic"])


def real_capacity_enabled():
    """Certified capacity on real embeddings needs the extract stage."""
    return config["synthetic"]["real_capacity"]["enabled"] and stage_enabled("extract")


def real_capacity_tables():
    """One certified-capacity table per extracted model and layer."""
    return [
        f"results/capacity/{model}/{layer}.csv"
        for model in extract_models()
        for layer in model_layers(model)
    ]


def synthetic_targets():
    """Final outputs of the synthetic stage."""
    if not stage_enabled("synthetic"):
        return []
    targets = [
        "results/synthetic/summary.csv",
        "results/synthetic/saturation.png",
    ] + expand("results/synthetic/memorized_{sweep}.png", sweep=synthetic_sweeps())
    if real_capacity_enabled():
        targets += ["results/capacity/real.csv", "results/capacity/real.png"]
    return targets


def synthetic_section(wildcards):
    """The validated synthetic config section."""
    return config["synthetic"]


def synthetic_sweep_mem_mb(wildcards):
    """Memory request of a sweep job from its replica count, largest T, n and d."""
    section = config["synthetic"]
    sweep = section["sweeps"][wildcards.sweep]
    contexts_tasks = len(sweep["contexts"]) * len(sweep["tasks"]) * len(section["seeds"])
    replicas = len(sweep["values"]) * len(sweep["examples"]) * contexts_tasks
    n_max = max(sweep["values"]) if wildcards.sweep == "context_size" else sweep["n"]
    floats = replicas * max(sweep["examples"]) * (n_max + 1) * section["d"]
    return SYNTHETIC_BASE_MB + SYNTHETIC_FLOATS_PER_TOKEN * 4 * floats // 2**20


rule run_synthetic_sweep:
    output:
        table="results/synthetic/{sweep}.csv",
        saturation="results/synthetic/{sweep}_saturation.csv",
        provenance="results/synthetic/{sweep}_provenance.json",
    params:
        synthetic=synthetic_section,
        seed=config["seed"],
        device=config["device"],
    wildcard_constraints:
        sweep="|".join(SWEEPS),
    log:
        "logs/run_synthetic_sweep/{sweep}.log",
    benchmark:
        "benchmarks/results/run_synthetic_sweep/{sweep}.tsv"
    threads: 1
    resources:
        mem_mb=synthetic_sweep_mem_mb,
        gpu=gpu_request,
    conda:
        "../envs/compute.yaml"
    script:
        "../workflow/scripts/run_synthetic_sweep.py"


rule summarize_synthetic:
    input:
        tables=expand("results/synthetic/{sweep}.csv", sweep=synthetic_sweeps()),
        saturation=expand(
            "results/synthetic/{sweep}_saturation.csv", sweep=synthetic_sweeps()
        ),
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
    threads: 1
    resources:
        mem_mb=1000,
    conda:
        "../envs/compute.yaml"
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
    wildcard_constraints:
        sweep="|".join(SWEEPS),
    log:
        "logs/plot_synthetic_sweep/{sweep}.log",
    threads: 1
    resources:
        mem_mb=1000,
    conda:
        "../envs/compute.yaml"
    script:
        "../workflow/scripts/plot_synthetic_sweep.py"


rule plot_synthetic_saturation:
    input:
        saturation=expand(
            "results/synthetic/{sweep}_saturation.csv", sweep=synthetic_sweeps()
        ),
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
    threads: 1
    resources:
        mem_mb=1000,
    conda:
        "../envs/compute.yaml"
    script:
        "../workflow/scripts/plot_synthetic_saturation.py"


rule certify_real_capacity:
    input:
        queries="results/extract/{model}/{layer}/queries.npy",
        contexts="results/extract/{model}/{layer}/contexts.npy",
    output:
        table="results/capacity/{model}/{layer}.csv",
        provenance="results/capacity/{model}/{layer}_provenance.json",
    params:
        settings=config["synthetic"]["real_capacity"],
        seed=config["seed"],
    wildcard_constraints:
        model=extract_model_pattern(),
        layer=r"[0-9]+|random_attention",
    log:
        "logs/certify_real_capacity/{model}/{layer}.log",
    benchmark:
        "benchmarks/results/certify_real_capacity/{model}/{layer}.tsv"
    threads: 1
    resources:
        mem_mb=REAL_CAPACITY_MB,
    conda:
        "../envs/compute.yaml"
    script:
        "../workflow/scripts/certify_real_capacity.py"


rule summarize_real_capacity:
    input:
        tables=real_capacity_tables(),
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
    threads: 1
    resources:
        mem_mb=1000,
    conda:
        "../envs/compute.yaml"
    script:
        "../workflow/scripts/summarize_real_capacity.py"
