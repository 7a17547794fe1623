"""How paper B's sweeps are cut into jobs (``aot.cut``): one job for the stage, one per sweep,
or one per (sweep, setting).

A setting job trains every seed of one setting of a sweep (:func:`memcap.aot.sweep.run_sweep`
with ``only``). Tasks, samples and initialisations derive from the setting and the replicate
seed, never from the job; each setting trains in a batched model of its own when
``engine.aot.pad_replicas`` is false (:func:`check_cut`), so its rows equal those of the
sweep's job. With padding, settings of different shapes share a model and its rounding.

No torch import here: the Snakefile imports this module to name the jobs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memcap.aot.settings import GRID_KEYS, Setting, expand_sweep
from memcap.errors import ConfigError

CUTS = ("stage", "sweep", "setting")
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
