"""What every stage shares: config validation, the configured models and their layers, the
report() flags and benchmark files of the layout table, the targets of rule all.

Each stage's own functions live beside its rules, in rules/<stage>_functions.smk (the linter
wants functions and rules in separate files); plain Python lives in the memcap package.
"""

import re
import sys
from functools import cache
from pathlib import Path

from snakemake.exceptions import WorkflowError

# The package lives in src/; make it importable for the Snakefile even outside an install.
sys.path.insert(0, str(Path(workflow.basedir) / "src"))

import memcap.cluster.costs as cluster_costs
from memcap.cluster.jobs import JobCosts
from memcap.config_schema import validate_schema
from memcap.errors import ConfigError
from memcap.extract.depth import with_layers
from memcap.extract.entries import model_entry as typed_model_entry
from memcap.extract.layer_spec import layer_name
from memcap.report.layout import figure_labels, folder_flag, layout_table
from memcap.validation import check_config, check_old_keys

# Keys of an older config shape first (the schema would only call them unknown), then the
# schema (which fills in every default), then the checks a schema cannot express.
try:
    check_old_keys(config)
    validate_schema(
        config, workflow.source_path("../workflow/schemas/config.schema.yaml")
    )
    check_config(config)
except ConfigError as err:
    raise WorkflowError(str(err)) from None

REPORT_CAPTIONS = "../workflow/report/"
# The summaries, plots and the report: seconds of CPU each, after every compute job. On a
# cluster they run as one group job (one submission and queue wait for the chain, not three);
# a local run ignores groups.
REPORT_GROUP = "report"


def stage_enabled(stage):
    """Whether the config switches the stage on (the schema defaults it to on)."""
    return config[stage].get("enabled", True)


def capacity_enabled():
    """Certified capacity on real embeddings needs the extract stage."""
    return stage_enabled("capacity") and stage_enabled("extract")


def stage_targets():
    """Every final output of the enabled stages but the report (its inputs)."""
    return (
        extract_targets()
        + assumptions_targets()
        + synthetic_targets()
        + capacity_targets()
        + real_memorization_targets()
        + aot_targets()
    )


def all_targets(wildcards):
    """Every final output of the enabled stages, ending in the report."""
    return stage_targets() + report_targets()


def gpu_request(wildcards=None):
    """GPU count for torch jobs; none when the config pins the CPU, else one."""
    return 0 if config["device"] == "cpu" else 1


@cache
def job_costs():
    """The cost model applied to this config's jobs (memcap.cluster.jobs)."""
    rates = cluster_costs.load_rates(workflow.basedir)
    return JobCosts(config, rates, resolved_entry)


def job_runtime(rule):
    """Resource function of ``rule``: a job's wall-time request in minutes, from its work and
    the measured rates of the device it asks for, with the cost model's margin."""

    def runtime(wildcards, threads):
        return job_costs().runtime(rule, dict(wildcards.items()), threads)

    return runtime


# --- the configured models (extract, assumptions, capacity and the report use them) ---------


def extract_models():
    """Names of the configured models: the {model} wildcard values."""
    return [entry["name"] for entry in config["extract"]["models"]]


def extract_model_pattern():
    """Regex of the {model} wildcard: exactly the configured names."""
    return "|".join(re.escape(name) for name in extract_models()) or "(?!)"


def extract_entry(name):
    """The (schema-defaulted) config entry of model `name`."""
    for entry in config["extract"]["models"]:
        if entry["name"] == name:
            return entry
    raise ValueError(f"no model named {name!r} in extract.models")


def typed_entry(name):
    """The typed ModelEntry of model `name`."""
    return typed_model_entry(
        extract_entry(name), extract_models().index(name), config["seed"]
    )


@cache
def resolved_entry(name):
    """The typed entry of model `name` with explicit layers (`all` and ranges resolved; a
    depth no file gives builds the architecture once, without weights)."""
    try:
        return with_layers(typed_entry(name))
    except ConfigError as err:
        raise WorkflowError(str(err)) from None


def model_layers(name):
    """Layer wildcard values of model `name`: "0", "1", ..., "random_attention"."""
    return [layer_name(layer) for layer in resolved_entry(name).layers]


def model_detail_layers(name):
    """Layer wildcard values of model `name`'s detail layers (audited in full)."""
    return [layer_name(layer) for layer in resolved_entry(name).detail_layers]


def model_depth_rows(name):
    """Layer wildcard values of model `name`'s depth rows (its other layers)."""
    return [layer_name(layer) for layer in resolved_entry(name).depth_rows]


def detail_layers_param(wildcards):
    """The job's model's detail layers, in the order of its inputs."""
    return model_detail_layers(wildcards.model)


def depth_models():
    """Models with a depth profile (ModelEntry.has_depth_profile)."""
    return [name for name in extract_models() if resolved_entry(name).has_depth_profile]


def audited_models():
    """Models the assumption stage checks: a detail layer or a depth profile."""
    depth = set(depth_models())
    return [m for m in extract_models() if model_detail_layers(m) or m in depth]


# --- the layout table: report() flags and benchmark files, read at parse time -------------


def figure_report(kind, **wildcards):
    """The report() flag of a figure kind written file by file: its file pattern (filled in
    when ``wildcards`` are given, for a rule that writes every file of the kind)."""
    entry = layout_table()["figures"][kind]
    fill = (lambda text: text.format(**wildcards)) if wildcards else (lambda text: text)
    return report(
        fill(entry["pattern"]),
        caption=f"{REPORT_CAPTIONS}{entry['caption']}",
        category=entry["category"],
        subcategory=fill(entry["subcategory"]),
        labels={key: fill(value) for key, value in entry["labels"].items()},
    )


def folder_report(folder):
    """The report() flag of an output folder a job writes whole: every figure kind the layout
    table puts in it, found by pattern, each file with its kind's labels."""
    flag = folder_flag(folder)

    def labels(wildcards):
        return figure_labels(folder, dict(wildcards.items()))

    return report(
        directory(folder),
        patterns=flag["patterns"],
        caption=f"{REPORT_CAPTIONS}{flag['caption']}",
        category=flag["category"],
        subcategory=flag["subcategory"],
        labels=labels,
    )


def benchmark_file(rule_name):
    """Benchmark file pattern of the compute rule ``rule_name`` (one per {job} or {model})."""
    return layout_table()["benchmarks"][rule_name]["pattern"]
