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


def extract_targets():
    """Final outputs of the extract stage."""
    return []


# --- assumptions ---------------------------------------------------------------------------------


def assumptions_targets():
    """Final outputs of the assumptions stage."""
    return []


# --- synthetic -----------------------------------------------------------------------------------


def synthetic_targets():
    """Final outputs of the synthetic stage."""
    return []


# --- aot -----------------------------------------------------------------------------------------


def aot_targets():
    """Final outputs of the aot stage."""
    return []


# --- report --------------------------------------------------------------------------------------


def report_targets():
    """Final outputs of the report stage."""
    return []
