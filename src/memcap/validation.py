"""Config checks that a JSON schema cannot express.

The schema (``workflow/schemas/config.schema.yaml``) checks types, ranges and unknown keys;
the functions here check impossible combinations and name the offending key. Each stage
contributes one checker; :func:`check_config` runs them all before any job starts.
:func:`check_old_keys` runs before the schema, so a config of an older shape is told which
key or value replaced the one it uses rather than only that the key is unknown.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memcap.aot.checks import check_aot_config
from memcap.aot.cut import check_cut as check_aot_cut
from memcap.errors import ConfigError
from memcap.extract.checks import check_extract_config
from memcap.real_memorization.settings import check_real_memorization_config
from memcap.synthetic.checks import check_synthetic_config
from memcap.synthetic.cut import check_cut as check_synthetic_cut

Config = Mapping[str, Any]

STAGE_CHECKERS = (
    check_extract_config,
    check_synthetic_config,
    check_synthetic_cut,
    check_aot_config,
    check_aot_cut,
    check_real_memorization_config,
)
# Keys of an older config shape -> the key that replaced them. "*" matches any key and stands
# for the same key in the new path. Same parent: the key was renamed; else it moved.
OLD_KEYS = {
    "synthetic.real_capacity": "capacity",
    "synthetic.sweeps.*.steps": "synthetic.sweeps.*.train.steps",
    "synthetic.sweeps.*.heads": "synthetic.sweeps.*.H",
    "synthetic.sweeps.*.head_dim": "synthetic.sweeps.*.d_h",
    "synthetic.sweeps.*.examples": "synthetic.sweeps.*.T",
    "synthetic.train.extra_rounds": "synthetic.train.extra_budgets",
    "synthetic.group_by": "engine.synthetic.group_by",
    "synthetic.max_padding": "engine.synthetic.max_padding",
    "synthetic.leave_when_fit": "engine.synthetic.leave_when_fit",
    "synthetic.precision": "engine.precision",
    "synthetic.compile": "engine.compile",
    "capacity.max_heads": "capacity.max_H",
    "capacity.max_examples": "capacity.max_T",
    "capacity.head_dim": "capacity.d_h",
    "aot.lr": "aot.train.lr",
    "aot.schedule": "aot.train.schedule",
    "aot.warmup_frac": "aot.train.warmup_frac",
    "aot.epochs": "aot.train.epochs",
    "aot.batch_size": "aot.train.batch_size",
    "aot.eval_every": "aot.train.eval_every",
    "aot.early_stop": "aot.train.early_stop",
    "aot.sweeps.*.epochs": "aot.sweeps.*.train.epochs",
    "aot.sweeps.*.lr": "aot.sweeps.*.train.lr",
    "aot.pad_replicas": "engine.aot.pad_replicas",
}
# Keys of an older config shape that no longer have a meaning -> why.
REMOVED_KEYS = {
    "engine.step": "one training step remains: each model's forward and autograd's backward",
}
# Values of an older config shape: key -> {old value: new value} (also inside a list).
OLD_VALUES = {
    "aot.sweeps.*.variant": {"authors": "code"},
    "engine.synthetic.group_by": {"examples": "T"},
}
# Sections whose `seeds` is a count of replicate seeds (once a list in `synthetic`).
SEED_COUNT_SECTIONS = ("synthetic", "aot")


def check_config(config: Config) -> None:
    """Run every stage's cross-field checks; raise ``ConfigError`` on the first problem."""
    for checker in STAGE_CHECKERS:
        checker(config)


def check_old_keys(config: Config) -> None:
    """Raise ``ConfigError`` naming the new key or value for one of an older config shape, or
    saying why a removed key has no meaning."""
    for old, new in OLD_KEYS.items():
        for found, _ in _matches(config, old.split(".")):
            raise _old_key_error(found, new)
    for old, why in REMOVED_KEYS.items():
        for found, _ in _matches(config, old.split(".")):
            raise ConfigError(found, f"removed ({why})", f"delete {found}")
    for key, renamed in OLD_VALUES.items():
        for found, value in _matches(config, key.split(".")):
            items = value if isinstance(value, list) else [value]
            old = next((v for v in items if isinstance(v, str) and v in renamed), None)
            if old is not None:
                fixed = [renamed.get(v, v) for v in items] if isinstance(value, list) else None
                shown = f"[{', '.join(map(str, fixed))}]" if fixed else renamed[old]
                raise ConfigError(
                    found,
                    f"{old!r} is now {renamed[old]!r}",
                    f"use {found.rpartition('.')[2]}: {shown}",
                )
    for section in SEED_COUNT_SECTIONS:
        seeds = (config.get(section) or {}).get("seeds")
        if isinstance(seeds, list):
            raise ConfigError(
                f"{section}.seeds",
                f"a list of seeds {seeds} is the old shape",
                f"give the number of replicate seeds, e.g. {section}.seeds: {len(seeds)}",
            )


def _old_key_error(found: str, new: str) -> ConfigError:
    """The one-line error for key ``found`` of an older shape, which became ``new``."""
    parts = found.split(".")
    new = ".".join(parts[i] if part == "*" else part for i, part in enumerate(new.split(".")))
    parent, _, name = new.rpartition(".")
    if parent == found.rpartition(".")[0]:
        return ConfigError(found, f"renamed to {name!r}", f"use {new} instead")
    return ConfigError(found, f"moved to {new}", f"use {new} instead")


def _matches(node: Any, parts: list[str], prefix: str = "") -> list[tuple[str, Any]]:
    """(dotted path, value) of every key in ``node`` matching ``parts`` ("*": any key)."""
    if not parts:
        return [(prefix, node)]
    if not isinstance(node, Mapping):
        return []
    head, rest = parts[0], parts[1:]
    keys = list(node) if head == "*" else [head] if head in node else []
    return [
        found
        for key in keys
        for found in _matches(node[key], rest, f"{prefix}.{key}" if prefix else str(key))
    ]
