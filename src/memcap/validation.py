"""Cross-field config checks that a JSON schema cannot express.

The schema (``workflow/schemas/config.schema.yaml``) checks types, ranges and unknown keys;
the functions here check impossible combinations and name the offending key. Each stage
contributes one checker; :func:`check_config` runs them all before any job starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memcap.aot.settings import check_aot_config
from memcap.extract.config import check_extract_config
from memcap.synthetic_config import check_synthetic_config

Config = Mapping[str, Any]

STAGE_CHECKERS = (check_extract_config, check_synthetic_config, check_aot_config)


def check_config(config: Config) -> None:
    """Run every stage's cross-field checks; raise ``ConfigError`` on the first problem."""
    for checker in STAGE_CHECKERS:
        checker(config)
