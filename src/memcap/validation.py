"""Config checks that a JSON schema cannot express.

The schema (``workflow/schemas/config.schema.yaml``) checks types, ranges and unknown keys;
the functions here check impossible combinations and name the offending key. Each stage
contributes one checker; :func:`check_config` runs them all before any job starts.
:func:`check_moved_keys` runs before the schema, so a config of an older shape is told which
key replaced the one it uses rather than only that the key is unknown.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memcap.aot.settings import MOVED_KEYS as AOT_MOVED_KEYS
from memcap.aot.settings import check_aot_config
from memcap.errors import ConfigError
from memcap.extract.checks import check_extract_config
from memcap.synthetic.settings import MOVED_KEYS as SYNTHETIC_MOVED_KEYS
from memcap.synthetic.settings import check_synthetic_config

Config = Mapping[str, Any]

STAGE_CHECKERS = (check_extract_config, check_synthetic_config, check_aot_config)
MOVED_KEYS = {**SYNTHETIC_MOVED_KEYS, **AOT_MOVED_KEYS}
# Sections whose `seeds` is a count of replicate seeds (once a list in `synthetic`).
SEED_COUNT_SECTIONS = ("synthetic", "aot")


def check_config(config: Config) -> None:
    """Run every stage's cross-field checks; raise ``ConfigError`` on the first problem."""
    for checker in STAGE_CHECKERS:
        checker(config)


def check_moved_keys(config: Config) -> None:
    """Raise ``ConfigError`` naming the new key for a key of an older config shape."""
    for old, new in MOVED_KEYS.items():
        for found in _matches(config, old.split(".")):
            raise ConfigError(found, "this key has moved", f"use {new} instead")
    for section in SEED_COUNT_SECTIONS:
        seeds = (config.get(section) or {}).get("seeds")
        if isinstance(seeds, list):
            raise ConfigError(
                f"{section}.seeds",
                f"a list of seeds {seeds} is the old shape",
                f"give the number of replicate seeds, e.g. {section}.seeds: {len(seeds)}",
            )


def _matches(node: Any, parts: list[str], prefix: str = "") -> list[str]:
    """Dotted paths in ``node`` matching ``parts`` ("*" matches any key)."""
    if not parts:
        return [prefix]
    if not isinstance(node, Mapping):
        return []
    head, rest = parts[0], parts[1:]
    keys = list(node) if head == "*" else [head] if head in node else []
    return [
        path
        for key in keys
        for path in _matches(node[key], rest, f"{prefix}.{key}" if prefix else str(key))
    ]
