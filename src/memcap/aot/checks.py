"""Cross-field checks of the ``aot`` section, before any job starts.

No torch import here: the Snakefile's config validation imports this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memcap.aot.settings import GRID_KEYS, MAX_SEQUENCES, Setting, expand_sweep
from memcap.errors import ConfigError
from memcap.training.config import with_overrides


def check_aot_config(config: Mapping[str, Any]) -> None:
    """Reject impossible aot settings (after schema validation); name the offending key."""
    aot = config.get("aot", {})
    if not aot.get("enabled", True):
        return
    sweeps = aot.get("sweeps", {})
    if not sweeps:
        raise ConfigError("aot.sweeps", "no sweep is configured", "add a sweep or disable aot")
    for name, spec in sweeps.items():
        key = f"aot.sweeps.{name}"
        for grid_key in GRID_KEYS:
            if spec[grid_key] == []:
                raise ConfigError(
                    f"{key}.{grid_key}", "the list of values is empty", "give at least one value"
                )
        if not spec["models"]:
            raise ConfigError(f"{key}.models", "no model is listed", "list aot and/or mlp")
        _check_recipe(key, spec, aot)
        for s in expand_sweep(name, spec):
            _check_setting(key, s)


def _check_recipe(key: str, spec: Mapping[str, Any], aot: Mapping[str, Any]) -> None:
    """The sweep's train overrides must belong to its recipe; the authors' sizes must fit."""
    recipe = spec["recipe"]
    stage = aot["authors"] if recipe == "authors" else aot["train"]
    block = "aot.authors" if recipe == "authors" else "aot.train"
    for name, value in spec["train"].items():
        if value is not None and name not in stage:
            raise ConfigError(
                f"{key}.train.{name}",
                f"recipe {recipe} has no setting {name} (its settings are {block})",
                f"remove it, or use recipe {'ours' if recipe == 'authors' else 'authors'}",
            )
    if recipe != "authors":
        return
    train = with_overrides(stage, spec["train"])
    if train["sample"] < train["batch_size"]:
        raise ConfigError(
            f"{key}.train.sample",
            f"a sample of {train['sample']} sequences holds no batch of {train['batch_size']}",
            "use sample >= batch_size",
        )
    for name in ("final_lr", "mlp_final_lr"):
        if train[name] > train["lr"]:
            raise ConfigError(
                f"{block}.{name}",
                f"{name} = {train[name]} exceeds lr = {train['lr']}; the schedule only decays",
                f"use {name} <= lr",
            )


def _check_setting(key: str, s: Setting) -> None:
    if s.H < 1:
        raise ConfigError(f"{key}.H", f"H = {s.H} heads", "use H >= 1")
    if s.d_h < 1:
        raise ConfigError(f"{key}.d_h", f"d_h = {s.d_h}", "use d_h >= 1")
    if s.d_h > s.d:
        raise ConfigError(
            f"{key}.d_h",
            f"head dimension d_h = {s.d_h} exceeds the embedding dimension d = {s.d}",
            "use d_h <= d, or set cap_d_h: true to use min(d_h, d)",
        )
    if s.N < 2:
        raise ConfigError(f"{key}.N", f"dictionary size N = {s.N}", "use N >= 2")
    if s.N**s.S > MAX_SEQUENCES:
        raise ConfigError(
            f"{key}.S",
            f"N^S = {s.N}^{s.S} inputs are too many to enumerate (limit {MAX_SEQUENCES})",
            "lower N or S",
        )
    if s.task == "distribution" and s.temperature <= 0:
        raise ConfigError(f"{key}.temperature", "must be positive", "use e.g. 1.0")
