"""Chance: what a model that memorized nothing counts as memorized.

A constant output is right on every example whose label it names: T uniform labels over C
classes put the largest class count on the most frequent label, about
T/C + √(2(T/C) ln C) examples. For regression a constant c counts every target within the
tolerance of it: the most targets any window of width 2·tol holds. Both are computed by
simulation (fixed seed, so a table is reproducible), as the expectation and its upper 95%
quantile: a trained count at or below the quantile is indistinguishable from chance (the count
is itself the best of several trainings, each of which a constant could match).
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import numpy as np

DRAWS = 2000  # simulated label draws: the expectation's standard error is below 0.1 examples
LEVEL = 0.95  # the quantile at or below which a count is chance


class Chance(NamedTuple):
    """The expected chance count of T examples and its upper LEVEL quantile."""

    expected: float
    high: float


@lru_cache(maxsize=512)
def chance_count(T: int, classes: int, tol: float | None = 0.0, seed: int = 0) -> Chance:
    """Chance for T examples: labels uniform over ``classes`` (classification), or targets
    uniform on [0, 1] counted within ``tol`` (``classes`` = 0: regression)."""
    if T < 1:
        return Chance(0.0, 0.0)
    rng = np.random.default_rng(seed)
    if classes > 0:
        counts = rng.multinomial(T, np.full(classes, 1.0 / classes), size=DRAWS)
        best = counts.max(axis=1)
    elif tol:
        best = np.array([_window_count(np.sort(rng.random(T)), 2.0 * tol) for _ in range(DRAWS)])
    else:  # exact regression: a constant equals no continuous target
        return Chance(0.0, 0.0)
    return Chance(round(float(best.mean()), 2), float(np.quantile(best, LEVEL)))


def _window_count(values: np.ndarray, width: float) -> int:
    """The most sorted ``values`` that one closed window of ``width`` holds."""
    ends = np.searchsorted(values, values + width, side="right")
    return int((ends - np.arange(len(values))).max())


@lru_cache(maxsize=64)
def fitted_chance(classes: int, tol: float | None = 0.0, seed: int = 0) -> Chance:
    """Chance for ``fitted_T``: the longest prefix of nested random labels that one constant
    output fits exactly (labels all equal; targets all within ``tol`` of one value)."""
    rng = np.random.default_rng(seed)
    if classes > 0:
        labels = rng.integers(0, classes, size=(DRAWS, 64))
        runs = np.argmin(labels == labels[:, :1], axis=1)
        runs[(labels == labels[:, :1]).all(axis=1)] = labels.shape[1]
    elif tol:
        targets = rng.random((DRAWS, 64))
        spread = np.maximum.accumulate(targets, 1) - np.minimum.accumulate(targets, 1)
        runs = np.argmax(spread > 2.0 * tol, axis=1)
    else:
        return Chance(0.0, 0.0)
    return Chance(round(float(runs.mean()), 2), float(np.quantile(runs, LEVEL)))
