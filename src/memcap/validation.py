"""Cross-field config checks that a JSON schema cannot express.

The schema (``workflow/schemas/config.schema.yaml``) checks types, ranges and unknown keys;
the functions here check impossible combinations and name the offending key. Each stage
contributes one checker; :func:`check_config` runs them all before any job starts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Config = Mapping[str, Any]


class ConfigError(ValueError):
    """A config value that cannot work; the message names the key and how to fix it."""

    def __init__(self, key: str, problem: str, fix: str) -> None:
        super().__init__(f"config key '{key}': {problem}. Fix: {fix}")
        self.key = key


def _stage_checkers() -> list[Callable[[Config], None]]:
    """Each stage's checker, imported lazily so the Snakefile stays light (no torch import)."""
    from memcap.aot.settings import check_aot_config
    from memcap.extract.config import check_extract_config
    from memcap.synthetic_config import check_synthetic_config

    return [check_extract_config, check_synthetic_config, check_aot_config]


def check_config(config: Config) -> None:
    """Run every stage's cross-field checks; raise :class:`ConfigError` on the first problem."""
    for checker in _stage_checkers():
        checker(config)
