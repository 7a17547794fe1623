"""Config checks and every named input/param/target function of the workflow.

Snakemake's linter wants functions apart from rules, so each stage keeps its functions in
its own section below and its rules in rules/<stage>.smk.
"""

import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

# The package lives in src/; make it importable for the Snakefile even outside an install.
sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from memcap.validation import ConfigError, check_config

try:
    check_config(config)
except ConfigError as err:
    raise WorkflowError(str(err)) from None


def stage_enabled(stage):
    """Whether the config switches the stage on (the schema defaults it to on)."""
    return config[stage].get("enabled", True)


def all_targets(wildcards):
    """Every final output of the enabled stages, ending in the report."""
    return (
        extract_targets()
        + assumptions_targets()
        + synthetic_targets()
        + aot_targets()
        + report_targets()
    )


def gpu_request(wildcards=None):
    """GPU count for torch jobs; none when the config pins the CPU, else one."""
    return 0 if config["device"] == "cpu" else 1


# --- extract -------------------------------------------------------------------------------------

import re

# What each (model, layer) job writes under results/extract/{model}/{layer}/.
EXTRACT_FILES = ("queries.npy", "contexts.npy", "provenance.json")
# Resident memory of an extraction job besides its batch: interpreter, torch, data and one
# base-size model (measured peak 1.6 GB for ViT-B/16 at batch 32; see README).
EXTRACT_BASE_MB = 2000
# Activations of one example (MB) of a base-size model, with room for n up to 512 tokens.
EXTRACT_MB_PER_EXAMPLE = 20


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
        for filename in EXTRACT_FILES
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
    """Memory request: a fixed base plus the activations of one batch (not T x n x d)."""
    return EXTRACT_BASE_MB + EXTRACT_MB_PER_EXAMPLE * config["extract"]["batch_size"]


# --- assumptions ---------------------------------------------------------------------------------


# Resident memory of an assumptions job besides its arrays: interpreter, torch, pandas.
ASSUMPTIONS_BASE_MB = 1000
# Batched prefix Gram matrices of the Kruskal search (memcap.rank.BATCH_BYTES) and slack.
KRUSKAL_BATCH_MB = 1024
# Largest n * d of one context assumed when sizing context-rank chunks (n = 512, d = 1024).
CONTEXT_MAX_ND = 512 * 1024


def assumptions_outputs(pattern):
    """``pattern`` expanded over every extracted (model, layer) pair, in config order."""
    return [
        pattern.format(model=name, layer=layer)
        for name in extract_models()
        for layer in model_layers(name)
    ]


def assumptions_targets():
    """Final outputs of the assumptions stage: summary table and per model x layer figures."""
    if not stage_enabled("assumptions"):
        return []
    return (
        ["results/assumptions/summary.csv"]
        + assumptions_outputs("results/assumptions/{model}/{layer}/kruskal_profile.png")
        + assumptions_outputs("results/assumptions/{model}/{layer}/context_rank.png")
    )


def assumptions_settings(wildcards=None):
    """The validated assumptions section, with the seed resolved."""
    section = dict(config["assumptions"])
    if section.get("seed") is None:
        section["seed"] = config["seed"]
    return section


def kruskal_mem_mb(wildcards):
    """Memory of a Kruskal job: the T x T float64 Gram matrix plus the batch buffers."""
    t = extract_entry(wildcards.model)["data"]["T"]
    return ASSUMPTIONS_BASE_MB + KRUSKAL_BATCH_MB + 3 * t * t * 8 // 2**20


def context_rank_mem_mb(wildcards):
    """Memory of a context-rank job: three float64 copies of one chunk of contexts."""
    chunk = config["assumptions"]["context_chunk"]
    return ASSUMPTIONS_BASE_MB + 3 * chunk * CONTEXT_MAX_ND * 8 // 2**20


def assumptions_kruskal_jsons(wildcards):
    """Every (model, layer) Kruskal summary, in config order."""
    return assumptions_outputs("results/assumptions/{model}/{layer}/kruskal.json")


def assumptions_context_jsons(wildcards):
    """Every (model, layer) context-rank summary, in config order."""
    return assumptions_outputs("results/assumptions/{model}/{layer}/context_rank.json")


# --- synthetic -----------------------------------------------------------------------------------

import memcap.synthetic_config as synthetic_config

# Peak memory of certify_real_capacity for T <= 1024, n <= 512, d <= 1024 (float64 Z, chunks).
REAL_CAPACITY_MB = 4000


def synthetic_sweeps():
    """The {sweep} wildcard values the config switches on."""
    return synthetic_config.enabled_sweeps(config["synthetic"])


def synthetic_sweep_pattern():
    """Regex of the {sweep} wildcard of the synthetic stage."""
    return "|".join(synthetic_config.SWEEPS)


def real_capacity_enabled():
    """Certified capacity on real embeddings needs the extract stage."""
    return config["synthetic"]["real_capacity"]["enabled"] and stage_enabled("extract")


def synthetic_targets():
    """Final outputs of the synthetic stage: tables, figures, real-data capacity."""
    if not stage_enabled("synthetic"):
        return []
    targets = ["results/synthetic/summary.csv", "results/synthetic/saturation.png"]
    targets += expand(
        "results/synthetic/memorized_{sweep}.png", sweep=synthetic_sweeps()
    )
    if real_capacity_enabled():
        targets += ["results/capacity/real.csv", "results/capacity/real.png"]
    return targets


def synthetic_section(wildcards):
    """The validated synthetic config section."""
    return config["synthetic"]


def real_capacity_settings(wildcards):
    """The validated synthetic.real_capacity settings."""
    return config["synthetic"]["real_capacity"]


def synthetic_sweep_tables(wildcards):
    """One result table per enabled sweep."""
    return expand("results/synthetic/{sweep}.csv", sweep=synthetic_sweeps())


def synthetic_saturation_tables(wildcards):
    """One saturation table per enabled sweep."""
    return expand("results/synthetic/{sweep}_saturation.csv", sweep=synthetic_sweeps())


def real_capacity_tables(wildcards):
    """One certified-capacity table per extracted model and layer."""
    return [
        f"results/capacity/{model}/{layer}.csv"
        for model in extract_models()
        for layer in model_layers(model)
    ]


def synthetic_sweep_mem_mb(wildcards):
    """Memory of a sweep job: its largest batched model's data and activations."""
    return synthetic_config.sweep_memory_mb(config["synthetic"], wildcards.sweep)


# --- aot -----------------------------------------------------------------------------------------

from memcap.aot.settings import sweep_memory_mb


def aot_sweeps():
    """The {sweep} wildcard values of the aot stage, in config order."""
    return list(config["aot"]["sweeps"])


def aot_targets():
    """Final outputs of the aot stage: summary, fits and the figures folder (one per sweep)."""
    if not stage_enabled("aot"):
        return []
    return ["results/aot/summary.csv", "results/aot/fits.csv", "results/aot/figures"]


def aot_training(wildcards):
    """The validated aot training settings (the aot section without its sweeps)."""
    return {key: value for key, value in config["aot"].items() if key != "sweeps"}


def aot_sweep_spec(wildcards):
    """One validated sweep: editing another sweep does not rerun this one."""
    return config["aot"]["sweeps"][wildcards.sweep]


def aot_sweep_tables(wildcards):
    """One table per configured sweep."""
    return expand("results/aot/{sweep}.csv", sweep=aot_sweeps())


def aot_sweep_mem_mb(wildcards):
    """Memory of a sweep job from its largest batched replica group."""
    spec = config["aot"]["sweeps"][wildcards.sweep]
    return sweep_memory_mb(wildcards.sweep, spec, config["aot"]["seeds"])


# --- report --------------------------------------------------------------------------------------


def report_targets():
    """Final outputs of the report stage."""
    return []
