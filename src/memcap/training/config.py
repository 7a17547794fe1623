"""Settings of the shared training loop, its seeds and its learning-rate schedule.

:class:`TrainConfig` holds the optimisation settings, built from a validated config section.
The fields up to ``regression_tol`` are required (their defaults live in the config schema
only); the later ones switch on parts of the authors' recipes and default to the plain loop.
Every seed derives from the config's global seed (:func:`replicate_seeds`,
:func:`derive_seed`), and :func:`lr_multiplier` gives a budget's warm-up and decay.

No torch import: the config checkers import this module before any job starts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

Schedule = Literal["cosine", "linear", "constant"]
Sampling = Literal["replacement", "shuffle"]
BestBy = Literal["memorized", "loss"]
# Arithmetic of the training step: float32; TF32 matmuls (CUDA only); bfloat16 compute on a
# copy of float32 master weights with float32 Adam (memcap.training.step).
Precision = Literal["float32", "tf32", "bf16"]
PRECISIONS = ("float32", "tf32", "bf16")


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
    # mini-batches drawn with replacement, or each replica's examples shuffled once per epoch
    sampling: Sampling = "replacement"
    lr_period: int = 1  # steps per learning-rate update (an epoch's batches: per-epoch schedule)
    final_lr_frac: float = 0.0  # the linear schedule ends at this fraction of lr
    warmup_start: float = 0.0  # the warm-up starts at this fraction of lr
    last_batches: int = 0  # > 0: also report the mean training-batch accuracy of the last k steps
    best_by: BestBy = (
        "memorized"  # the kept state: most memorized (then lowest loss), or lowest loss
    )
    precision: Precision = "float32"  # arithmetic of the training step (evaluation: float32)
    compile: bool = False  # torch.compile the step's forward and loss (CUDA: CUDA graphs)
    cuda_graph: bool = False  # capture the whole step (batch, step, Adam) once, replay it (CUDA)
    # replicas that memorized all their examples leave the batch at an evaluation (their
    # memorized count cannot grow; the state kept until then is reported)
    leave_when_fit: bool = False
    # budgets of ``steps`` more (warm-up and decay again) for replicas that have not fitted and
    # whose loss still fell by more than 5% over their last fifth of evaluations
    # (memcap.training.plateau); the others stop with the budget they had
    extra_budgets: int = 0
    extra_lr_frac: float = 0.1  # peak learning rate of an extra budget, as a fraction of lr

    def __post_init__(self) -> None:
        if self.steps < 1 or self.eval_every < 1 or self.lr_period < 1:
            raise ValueError("steps, eval_every and lr_period must be positive")
        if not 0.0 <= self.final_lr_frac <= 1.0 or not 0.0 <= self.warmup_start <= 1.0:
            raise ValueError("final_lr_frac and warmup_start must lie in [0, 1]")
        if self.last_batches < 0:
            raise ValueError("last_batches must be non-negative")
        if self.sampling == "shuffle" and self.batch_size is None:
            raise ValueError("shuffled epochs need a batch_size")
        if not 0.0 <= self.warmup_frac < 1.0:
            raise ValueError("warmup_frac must lie in [0, 1)")
        if self.batch_size is not None and self.batch_size < 1:
            raise ValueError("batch_size must be positive or None (full batch)")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision '{self.precision}' is not one of {list(PRECISIONS)}")
        if self.compile and self.cuda_graph:
            raise ValueError("compile and cuda_graph both capture CUDA graphs: choose one")
        if self.extra_budgets < 0:
            raise ValueError("extra_budgets must be non-negative")
        if self.last_batches and (self.leave_when_fit or self.extra_budgets):
            raise ValueError(
                "the last batches' accuracy needs every replica to run the same steps "
                "(no leave_when_fit, no extra_budgets)"
            )


def with_overrides(train: Mapping[str, Any], overrides: Mapping[str, Any] | None) -> dict:
    """A stage's ``train`` block with a sweep's own ``train`` values (null keeps the stage's)."""
    chosen = {key: value for key, value in (overrides or {}).items() if value is not None}
    return {**train, **chosen}


def replicate_seeds(base_seed: int, count: int) -> list[int]:
    """The ``count`` replicate seeds of a setting: ``1000 · base_seed + k``, k = 0 … count − 1.

    A replicate seed labels one repetition in the result tables; with base seed 0 they are
    0, 1, ….
    """
    return [int(base_seed) * 1000 + k for k in range(count)]


def derive_seed(*parts: int | str) -> int:
    """A 63-bit seed determined by ``parts`` (ints or strings), independent across parts."""
    words = [p if isinstance(p, int) else int.from_bytes(p.encode(), "little") for p in parts]
    return int(np.random.SeedSequence(words).generate_state(2, np.uint32).view(np.uint64)[0] >> 1)


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
