"""Extract stage: token embeddings (queries, contexts) of real ViT / BERT / GPT-2 models.

Other stages expand their targets with extract_models() and model_layers(name).
"""

import re

EXTRACT_FILES = {
    "queries": "queries.npy",
    "contexts": "contexts.npy",
    "provenance": "provenance.json",
}
# Resident memory of an extraction job besides its batch: interpreter, torch, one model.
EXTRACT_BASE_MB = {"vit": 2000, "bert": 2000, "gpt2": 2000}
# Peak activation memory per example of a batch (MB), generous for d <= 1024, n <= 512.
EXTRACT_MB_PER_EXAMPLE = 40


def extract_models():
    """Names of the configured models: the {model} wildcard values."""
    return [entry["name"] for entry in config["extract"]["models"]]


def extract_entry(name):
    """The (schema-defaulted) config entry of model `name`."""
    for entry in config["extract"]["models"]:
        if entry["name"] == name:
            return entry
    raise ValueError(f"no model named {name!r} in extract.models")


def model_layers(name):
    """Layer wildcard values of model `name`: "0", "1", ..., "random_attention"."""
    return [str(layer) for layer in extract_entry(name)["layers"]]


def extract_targets():
    """Final outputs of the extract stage: three files per (model, layer)."""
    if not stage_enabled("extract"):
        return []
    return [
        f"results/extract/{name}/{layer}/{filename}"
        for name in extract_models()
        for layer in model_layers(name)
        for filename in EXTRACT_FILES.values()
    ]


def extract_model_pattern():
    """Regex of the {model} wildcard: exactly the configured names."""
    return "|".join(re.escape(name) for name in extract_models()) or "(?!)"


def extract_entry_param(wildcards):
    """Config entry of the job's model."""
    return extract_entry(wildcards.model)


def extract_index_param(wildcards):
    """Position of the job's model in extract.models, for error messages."""
    return extract_models().index(wildcards.model)


def extract_mem_mb(wildcards):
    """Memory request: a per-family base plus the activations of one batch."""
    family = extract_entry(wildcards.model)["family"]
    return EXTRACT_BASE_MB[family] + EXTRACT_MB_PER_EXAMPLE * config["extract"]["batch_size"]


rule extract_embeddings:
    output:
        queries=f"results/extract/{{model}}/{{layer}}/{EXTRACT_FILES['queries']}",
        contexts=f"results/extract/{{model}}/{{layer}}/{EXTRACT_FILES['contexts']}",
        provenance=f"results/extract/{{model}}/{{layer}}/{EXTRACT_FILES['provenance']}",
    params:
        entry=extract_entry_param,
        index=extract_index_param,
        seed=config["seed"],
        device=config["device"],
        batch_size=config["extract"]["batch_size"],
    wildcard_constraints:
        model=extract_model_pattern(),
        layer=r"[0-9]+|random_attention",
    log:
        "logs/extract_embeddings/{model}/{layer}.log",
    benchmark:
        "benchmarks/results/extract_embeddings/{model}/{layer}.tsv"
    threads: 1
    resources:
        mem_mb=extract_mem_mb,
        gpu=gpu_request,
    conda:
        "../envs/extract.yaml"
    script:
        "../workflow/scripts/extract_embeddings.py"
