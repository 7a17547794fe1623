"""The error every stage raises for a config value that cannot work.

It lives apart from :mod:`memcap.validation` and imports nothing from memcap, so that each
stage's checker can raise it while ``validation`` imports every checker at module level.
"""

from __future__ import annotations


class ConfigError(ValueError):
    """A config value that cannot work; the message names the key and how to fix it."""

    def __init__(self, key: str, problem: str, fix: str) -> None:
        super().__init__(f"config key '{key}': {problem}. Fix: {fix}")
        self.key, self.problem, self.fix = key, problem, fix
