"""Config checks, wildcard constraints and named input/param functions. No rules here."""

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
    """GPUs a torch rule asks for: none when the config pins the CPU, else one."""
    return 0 if config["device"] == "cpu" else 1
