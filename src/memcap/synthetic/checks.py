"""Cross-field checks of the ``synthetic`` section, before any job starts.

No torch import here: the Snakefile's config validation imports this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memcap.errors import ConfigError
from memcap.synthetic.settings import CONTEXTS, TASKS, Ladder, SweepSpec, sweep_names, sweep_spec


def check_synthetic_config(config: Mapping[str, Any]) -> None:
    """Raise :class:`ConfigError` for a synthetic section that cannot run or means nothing."""
    section = config.get("synthetic", {})
    if not section.get("enabled", True) or "sweeps" not in section:
        return
    if not sweep_names(section):
        raise ConfigError(
            "synthetic.sweeps",
            "every sweep is disabled, so there is nothing to summarize",
            "enable a sweep, or switch the stage off with synthetic.enabled: false",
        )
    d = section["d"]
    ladder = Ladder.from_config(section)
    for name in sweep_names(section):
        spec = sweep_spec(section, name)
        _check_sweep(spec, d)
        if ladder.grow_at is not None and max(spec.T) > ladder.max_T:
            raise ConfigError(
                "synthetic.ladder.max_T",
                f"{ladder.max_T} is below the largest T {max(spec.T)} of sweep {name}",
                f"use max_T >= {max(spec.T)}, or shorten synthetic.sweeps.{name}.T",
            )
    threshold = section["saturation_threshold"]
    if not 0.5 <= threshold < 1.0:
        raise ConfigError(
            "synthetic.saturation_threshold",
            f"{threshold} is outside [0.5, 1), so it does not mark one-hot attention",
            "use a value such as 0.99",
        )


def _check_sweep(spec: SweepSpec, d: int) -> None:
    key = f"synthetic.sweeps.{spec.name}"
    _check_grid(f"{key}.values", spec.values, increasing=False)
    _check_grid(f"{key}.T", spec.T, increasing=True)
    for field, allowed in (("contexts", CONTEXTS), ("tasks", TASKS)):
        chosen = getattr(spec, field)
        if not chosen or len(set(chosen)) != len(chosen) or not set(chosen) <= set(allowed):
            raise ConfigError(
                f"{key}.{field}",
                f"{list(chosen)} is not a non-empty list of distinct values from {list(allowed)}",
                f"list one or more of {list(allowed)}",
            )
    largest_n = max(setting.n for setting in spec.settings())
    if largest_n > d:
        where = f"{key}.values" if spec.name == "context_size" else f"{key}.n"
        raise ConfigError(
            where,
            f"context size n={largest_n} exceeds d={d}: n tokens in R^d cannot have rank n "
            "(Assumption 2), and the bound H(n-1)+1 does not apply",
            "use n <= synthetic.d",
        )


def _check_grid(key: str, grid: tuple[int, ...], increasing: bool) -> None:
    if not grid:
        raise ConfigError(key, "the grid is empty", "list at least one value")
    if min(grid) < 1:
        raise ConfigError(key, f"{list(grid)} has a value below 1", "use positive integers")
    if len(set(grid)) != len(grid):
        raise ConfigError(key, f"{list(grid)} repeats a value", "list each value once")
    if increasing and list(grid) != sorted(grid):
        raise ConfigError(
            key,
            f"the T grid {list(grid)} is not increasing",
            "list dataset sizes in increasing order",
        )
