"""How paper B's sweeps are cut into jobs (``aot.cut``): one job for the stage, one per sweep,
or one per (sweep, setting).

A job's id is the one {job} wildcard of rule train_aot: :data:`STAGE_JOB` for the stage's one
job, the sweep ("heads"), or the sweep and its setting ("heads/aot_H6"). :func:`job_ids` lists
the cut's jobs in the order of the sweeps' table rows (their tables, read one after another,
are the sweeps'); :func:`job_sweeps` and :func:`job_setting` turn an id back into what it
trains.

A setting job trains every seed of one setting of a sweep (:func:`memcap.aot.sweep.run_sweep`
with ``only``). Tasks, samples and initialisations derive from the setting and the replicate
seed, never from the job; each setting trains in a batched model of its own when
``engine.aot.pad_replicas`` is false (:func:`check_cut`), so its rows equal those of the
sweep's job. With padding, settings of different shapes share a model and its rounding.

No torch import here: the Snakefile imports this module to name the jobs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from memcap.aot.settings import GRID_KEYS, Setting, expand_sweep
from memcap.errors import ConfigError

CUTS = ("stage", "sweep", "setting")
STAGE_JOB = "all"  # the id of aot.cut stage's one job, which trains every sweep
# Short names of the grid keys in a setting's id ("d_h" would read as two keys).
_KEY_NAMES = {"N": "N", "S": "S", "d": "d", "d_h": "dh", "H": "H"}


def setting_id(spec: Mapping[str, Any], s: Setting) -> str:
    """The {setting} wildcard of ``s``: its model, then the value of each of the sweep's
    list-valued keys ("aot_H6", "mlp_d7_w84": an MLP's width stands for its H)."""
    parts = [s.model]
    for key in GRID_KEYS:
        if isinstance(spec[key], list) and len(spec[key]) > 1:
            mlp_heads = key == "H" and s.model == "mlp"
            parts.append(f"w{s.width}" if mlp_heads else f"{_KEY_NAMES[key]}{getattr(s, key)}")
    return "_".join(parts)


def sweep_settings(name: str, spec: Mapping[str, Any]) -> dict[str, Setting]:
    """Every distinct setting of sweep ``name`` by id, in the order its table's rows come."""
    return {setting_id(spec, s): s for s in dict.fromkeys(expand_sweep(name, spec))}


def setting_pattern() -> str:
    """Regex of the {setting} wildcard: a model, then key-value parts."""
    return r"(aot|mlp)(_[A-Za-z]+[0-9]+)*"


def job_ids(section: Mapping[str, Any]) -> list[str]:
    """The training jobs of the validated ``aot`` section's cut, in the order of the sweeps'
    table rows: the stage's one job, each sweep, or each setting of each ("heads/aot_H6")."""
    sweeps = section["sweeps"]
    if section["cut"] == "stage":
        return [STAGE_JOB]
    if section["cut"] == "sweep":
        return list(sweeps)
    return [f"{name}/{s}" for name, spec in sweeps.items() for s in sweep_settings(name, spec)]


def job_pattern(sweeps: Sequence[str]) -> str:
    """Regex of the {job} wildcard under any cut, given the configured sweeps' names."""
    if not sweeps:
        return STAGE_JOB
    names = "|".join(re.escape(name) for name in sweeps)
    return f"{STAGE_JOB}|({names})(/{setting_pattern()})?"


def job_sweeps(cut: str, job: str, sweeps: Sequence[str]) -> list[str]:
    """The sweeps the job ``job`` of ``cut`` trains, of the configured ``sweeps``: every one
    for the stage's job, else the one its id names."""
    return list(sweeps) if cut == "stage" else [job.partition("/")[0]]


def job_setting(job: str, name: str, spec: Mapping[str, Any]) -> Setting | None:
    """The one setting of sweep ``name`` the job ``job`` trains (None: all of them)."""
    _, _, setting = job.partition("/")
    return sweep_settings(name, spec)[setting] if setting else None


def check_cut(config: Mapping[str, Any]) -> None:
    """Raise :class:`ConfigError` when the setting cut could change the results: each
    setting must train alone under every cut."""
    aot = config.get("aot", {})
    if aot.get("cut", "stage") != "setting" or not aot.get("enabled", True):
        return
    if config.get("engine", {}).get("aot", {}).get("pad_replicas", True):
        raise ConfigError(
            "engine.aot.pad_replicas",
            "padded settings share a batched model, so a job per setting (aot.cut: setting) "
            "would train them differently from a job per sweep or stage",
            "set engine.aot.pad_replicas: false, or use aot.cut: stage or sweep",
        )
