"""Optimisation settings of the shared training loop, built from a validated config section.

No torch import: the config checkers import this module before any job starts. Every field
is required; the defaults live in the config schema only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

Schedule = Literal["cosine", "linear", "constant"]


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings of one batched training run."""

    steps: int  # step budget per replica
    lr: float  # peak Adam learning rate
    warmup_frac: float  # fraction of steps with linear warm-up from 0
    schedule: Schedule  # decay after warm-up
    batch_size: int | None  # examples per replica and step; None = full batch
    eval_every: int  # steps between full-data evaluations (and early-stop checks)
    early_stop: bool  # stop once every replica fits its training set exactly
    regression_tol: float | None  # |prediction - target| below this counts as memorized

    def __post_init__(self) -> None:
        if self.steps < 1 or self.eval_every < 1:
            raise ValueError("steps and eval_every must be positive")
        if not 0.0 <= self.warmup_frac < 1.0:
            raise ValueError("warmup_frac must lie in [0, 1)")
        if self.batch_size is not None and self.batch_size < 1:
            raise ValueError("batch_size must be positive or None (full batch)")


def with_overrides(train: Mapping[str, Any], overrides: Mapping[str, Any] | None) -> dict:
    """A stage's ``train`` block with a sweep's own ``train`` values (null keeps the stage's)."""
    chosen = {key: value for key, value in (overrides or {}).items() if value is not None}
    return {**train, **chosen}
