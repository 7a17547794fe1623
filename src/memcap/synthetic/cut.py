"""How paper A's sweeps are cut into jobs (``synthetic.cut``): a job per sweep, or per setting.

A job's id is the one {job} wildcard of rule train_synthetic: the sweep ("heads"), or the sweep
and its setting ("heads/H5_shared"); :func:`job_ids` lists the cut's jobs in the order of the
sweeps' table rows, so that their tables, read one after another, are the sweeps' tables, and
:func:`job_spec` turns an id back into what it trains.

A *setting job* trains the series of one sweep value and context kind (every task and seed)
through the protocol of :mod:`memcap.synthetic.series`, on the sweep's own data and seeds:
every seed derives from the sweep, the setting, the replicate seed and T
(:mod:`memcap.synthetic.sweep`), never from the job. Its rows equal the sweep job's rows of
that setting when each setting's replicas train in batched models of their own, which
``engine.synthetic.group_by`` containing :data:`SETTING_GROUPING` gives under both cuts
(:func:`check_cut`); a batched model shared by several settings changes their float
rounding, and replicas leaving it change the others' steps.

No torch import here: the Snakefile imports this module to name the jobs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from memcap.errors import ConfigError
from memcap.synthetic.settings import (
    CONTEXTS,
    SWEEPS,
    SWEPT,
    SweepSpec,
    sweep_names,
    sweep_spec,
)

CUTS = ("sweep", "setting")
# group_by keys that split a sweep's replicas by setting (task always splits).
SETTING_GROUPING = ("shape", "context")


def setting_id(sweep: str, value: int, context: str) -> str:
    """The {setting} wildcard of sweep ``sweep`` at ``value`` and ``context``: "H5_shared"."""
    return f"{SWEPT[sweep].replace('_', '')}{value}_{context}"


def setting_ids(spec: SweepSpec) -> list[str]:
    """Every setting of the sweep, in the order of its table's rows (values, then contexts)."""
    return [setting_id(spec.name, value, c) for value in spec.values for c in spec.contexts]


def setting_spec(spec: SweepSpec, setting: str) -> SweepSpec:
    """The sweep ``spec`` restricted to one setting (its value and context; every task)."""
    for value in spec.values:
        for context in spec.contexts:
            if setting_id(spec.name, value, context) == setting:
                return dataclasses.replace(spec, values=(value,), contexts=(context,))
    raise ValueError(f"sweep {spec.name} has no setting {setting!r}")


def setting_pattern() -> str:
    """Regex of the {setting} wildcard: a swept parameter, its value and a context kind."""
    names = "|".join(sorted({p.replace("_", "") for p in SWEPT.values()}))
    return f"({names})[0-9]+_({'|'.join(CONTEXTS)})"


def job_ids(section: Mapping[str, Any]) -> list[str]:
    """The training jobs of the validated ``synthetic`` section's cut, in the order of the
    sweeps' table rows: each enabled sweep, or each setting of each ("heads/H5_shared")."""
    names = sweep_names(section)
    if section["cut"] == "sweep":
        return names
    return [f"{name}/{s}" for name in names for s in setting_ids(sweep_spec(section, name))]


def job_pattern() -> str:
    """Regex of the {job} wildcard under either cut: a sweep, then maybe one of its settings."""
    return f"({'|'.join(SWEEPS)})(/{setting_pattern()})?"


def job_spec(section: Mapping[str, Any], job: str) -> SweepSpec:
    """What the job ``job`` trains: its sweep, or the sweep restricted to its setting."""
    sweep, _, setting = job.partition("/")
    spec = sweep_spec(section, sweep)
    return setting_spec(spec, setting) if setting else spec


def check_cut(config: Mapping[str, Any]) -> None:
    """Raise :class:`ConfigError` when the setting cut could change the results: each
    setting must train in batched models of its own under either cut."""
    section = config.get("synthetic", {})
    if section.get("cut", "sweep") != "setting" or not section.get("enabled", True):
        return
    group_by = config.get("engine", {}).get("synthetic", {}).get("group_by", [])
    missing = [key for key in SETTING_GROUPING if key not in group_by]
    if missing:
        raise ConfigError(
            "engine.synthetic.group_by",
            f"{list(group_by)} batches several settings in one model, so a job per setting "
            "(synthetic.cut: setting) would train them differently from a job per sweep",
            f"add {missing} to engine.synthetic.group_by, or use synthetic.cut: sweep",
        )
