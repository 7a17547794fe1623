"""The learning-rate schedule of a step budget: linear warm-up, then cosine / linear / constant."""

from __future__ import annotations

import math

from memcap.training.config import TrainConfig


def lr_multiplier(step: int, cfg: TrainConfig) -> float:
    """Learning-rate factor at ``step``: linear warm-up, then cosine / linear / constant.

    The factor changes every ``cfg.lr_period`` steps (1: every step; an epoch's batch count:
    PyTorch's per-epoch ``LinearLR``). The warm-up rises from ``warmup_start``; linear and
    cosine decay end at ``final_lr_frac``.
    """
    tick, ticks = step // cfg.lr_period, math.ceil(cfg.steps / cfg.lr_period)
    warmup = int(cfg.warmup_frac * ticks)
    if tick < warmup:
        return cfg.warmup_start + (1.0 - cfg.warmup_start) * (tick + 1) / warmup
    progress = (tick - warmup) / max(1, ticks - warmup)
    floor = cfg.final_lr_frac
    if cfg.schedule == "cosine":
        return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))
    if cfg.schedule == "linear":
        return 1.0 - (1.0 - floor) * progress
    return 1.0


def lr_multipliers(cfg: TrainConfig) -> list[float]:
    """:func:`lr_multiplier` of every step of a budget, computed once before its steps."""
    return [lr_multiplier(step, cfg) for step in range(cfg.steps)]
