"""The ``real_memorization`` section as one heads sweep of the synthetic stage per layer, and
its checks (no torch import: the Snakefile's config validation imports this module)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from memcap.errors import ConfigError
from memcap.synthetic.settings import StageSettings, SweepSpec

INPUTS = ("real", "uniform", "gaussian")


def enabled(config: Mapping[str, Any]) -> bool:
    """Whether the stage runs: switched on, extraction on, and at least one layer listed."""
    section = config.get("real_memorization", {})
    extract_on = config.get("extract", {}).get("enabled", True)
    return bool(section.get("enabled", True) and extract_on and section.get("layers"))


def layers_of(section: Mapping[str, Any], model: str) -> list[int | str]:
    """The layers of ``model`` that the stage trains on, in config order."""
    return [entry["layer"] for entry in section["layers"] if entry["model"] == model]


def models(section: Mapping[str, Any]) -> list[str]:
    """The models with a layer to train on, in config order."""
    return list(dict.fromkeys(entry["model"] for entry in section["layers"]))


def sweep(section: Mapping[str, Any]) -> SweepSpec:
    """The stage's heads sweep: H over ``section["H"]`` at n' and d_h, the recipe's training."""
    return SweepSpec(
        name="heads",
        values=tuple(section["H"]),
        T=tuple(section["T"]),
        H=0,
        n=section["n"],
        d_h=section["d_h"],
        contexts=tuple(section["contexts"]),
        tasks=tuple(section["tasks"]),
        train={},
        recipe="ours",
        seeds=section["seeds"],
    )


def layer_stage(synthetic: StageSettings, section: Mapping[str, Any], d: int, examples: int):
    """The synthetic stage's settings for one layer of token dimension ``d`` and ``examples``
    extracted examples: the tokens enter as they are (``embedded``), and the ladder stops at
    ``max_T`` or at the examples there are."""
    ladder = replace(synthetic.ladder, max_T=min(section["max_T"], examples))
    return replace(synthetic, d=d, embedded=True, ladder=ladder)


def check_real_memorization_config(config: Mapping[str, Any]) -> None:
    """Raise :class:`ConfigError` for a section that names a model the run does not extract,
    or a shape outside Theorem 1's regime (that each layer is one of its model's detail
    layers is checked where they are resolved, rules/real_memorization_functions.smk)."""
    if not enabled(config):
        return
    section = config["real_memorization"]
    extracted = {entry["name"]: entry for entry in config.get("extract", {}).get("models", [])}
    for k, entry in enumerate(section["layers"]):
        key = f"real_memorization.layers[{k}]"
        if entry["model"] not in extracted:
            raise ConfigError(
                f"{key}.model",
                f"'{entry['model']}' is not an extract.models name",
                f"use one of {sorted(extracted)}",
            )
    if section["d_h"] < section["n"]:
        raise ConfigError(
            "real_memorization.d_h",
            f"d_h = {section['d_h']} is below n' = {section['n']}: Theorem 1 needs d_h >= n'",
            f"use d_h >= {section['n']}",
        )
    if list(section["T"]) != sorted(set(section["T"])) or max(section["T"]) > section["max_T"]:
        raise ConfigError(
            "real_memorization.T",
            f"{section['T']} is not increasing up to max_T = {section['max_T']}",
            "list distinct increasing T, none above real_memorization.max_T",
        )
