"""The ``real_memorization`` section as one heads sweep of the synthetic stage per layer, and
its checks (no torch import: the Snakefile's config validation imports this module)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from memcap.errors import ConfigError
from memcap.synthetic.settings import StageSettings, SweepSpec

INPUTS = ("real", "uniform", "gaussian")
OWN = "own"  # n, d_h or an H value: the layer's own, from its extraction provenance
_OWN_SIZES = {"n": "n", "d_h": "head_dim", "H": "heads"}  # section key: provenance key
BASE_MB = 1200  # interpreter, torch, pandas


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


def resolve(section: Mapping[str, Any], sizes: Mapping[str, Any]) -> dict[str, Any]:
    """The section at one layer: every ``own`` (n, d_h, an entry of H) replaced by the layer's
    n, head_dim or heads from its extraction provenance ``sizes``, H sorted and distinct."""
    resolved = dict(section)
    for key, field in _OWN_SIZES.items():
        values = section[key] if key == "H" else [section[key]]
        if OWN not in values:
            continue
        own = sizes.get(field)
        if not isinstance(own, int):
            raise ConfigError(
                f"real_memorization.{key}",
                f"'{OWN}' asks for the layer's {field}, which its extraction provenance does "
                f"not record ({own!r})",
                f"give real_memorization.{key} as numbers for this model",
            )
        values = [own if v == OWN else v for v in values]
        resolved[key] = sorted(set(values)) if key == "H" else values[0]
    return resolved


def layer_stage(synthetic: StageSettings, section: Mapping[str, Any], d: int, examples: int):
    """The synthetic stage's settings for one layer of token dimension ``d`` and ``examples``
    extracted examples: the tokens enter as they are (``embedded``), the ladder stops at
    ``max_T`` or at the examples there are, and fitted_T is bisected to the section's own
    ``bracket`` (None: not bisected), not the synthetic ladder's."""
    ladder = replace(
        synthetic.ladder,
        max_T=min(section["max_T"], examples),
        bracket=section.get("bracket"),
    )
    return replace(synthetic, d=d, embedded=True, ladder=ladder)


def memory_mb(section: Mapping[str, Any], T: int, n: int, d: int) -> int:
    """Memory of one train_real_memorization job on a model of T examples, n tokens per
    context and width d: the real contexts cut to n', and per seed a control's and a drawn
    subset's copy of them (float32)."""
    cut = n if section["n"] == OWN else min(section["n"], n)
    contexts = T * cut * d * 4
    return BASE_MB + (1 + 2 * section["seeds"]) * contexts // 2**20


def check_real_memorization_config(config: Mapping[str, Any]) -> None:
    """Raise :class:`ConfigError` for a section that names a model the run does not extract,
    or a T grid that is not increasing up to max_T (that each layer is one of its model's detail
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
    if list(section["T"]) != sorted(set(section["T"])) or max(section["T"]) > section["max_T"]:
        raise ConfigError(
            "real_memorization.T",
            f"{section['T']} is not increasing up to max_T = {section['max_T']}",
            "list distinct increasing T, none above real_memorization.max_T",
        )
