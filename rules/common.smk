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


def assumptions_targets():
    """Final outputs of the assumptions stage."""
    return []


# --- synthetic -----------------------------------------------------------------------------------


def synthetic_targets():
    """Final outputs of the synthetic stage."""
    return []


# --- aot -----------------------------------------------------------------------------------------

from memcap.aot.settings import sweep_memory_mb


def aot_sweeps():
    """The {sweep} wildcard values of the aot stage, in config order."""
    return list(config["aot"]["sweeps"])


def aot_targets():
    """Final outputs of the aot stage: summary, fits and one figure per sweep."""
    if not stage_enabled("aot"):
        return []
    return ["results/aot/summary.csv", "results/aot/fits.csv"] + expand(
        "results/aot/figures/{sweep}.png", sweep=aot_sweeps()
    )


def aot_section(wildcards):
    """The validated aot config section (training settings and sweeps)."""
    return config["aot"]


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
