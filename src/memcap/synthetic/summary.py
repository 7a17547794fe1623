"""From per-replica sweep rows to capacity estimates, linear fits and saturation tables.

Capacity estimate of a setting (sweep value, context, task, seed): the largest memorized
count over its T grid, ``capacity = max_T memorized(T)``. It is a count of training examples
the trained model gets exactly right; below capacity the model fits everything (memorized
= T), beyond it the count stops growing. The stricter ``fitted_T`` (the largest T of the grid
fitted at ≥ 99% accuracy) is reported beside it. Certified capacities are maxima over the grid
too; since the datasets of a grid are nested that is their value at the largest T.

A setting is ``censored`` when its largest T is memorized at or above the ladder's level
(``grow_at``; every example where the grid does not grow): the grid, not the model, bounds
its estimate. ``largest_drop`` is the largest fall of the memorized count from a smaller T to
a larger one, as a fraction of the smaller T's count (the datasets are nested, so a trained
model can keep what a smaller T's model memorized: a fall is the optimiser's).

A setting is flagged ``under_trained`` when the replica that sets its capacity did not fit
its data and its training loss still fell by more than ``STILL_FALLING`` (5%) over the last
fifth of its evaluations (:mod:`memcap.training.plateau`; with ``train.extra_budgets`` such
replicas have already trained further budgets): more steps would likely have memorized more.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from memcap.synthetic.bounds import linear_fit
from memcap.synthetic.settings import censor_level
from memcap.training.plateau import STILL_FALLING

SETTING = ["sweep", "swept", "value", "H", "n", "d_h", "context", "task", "seed", "bound"]
QUANTITIES = ("capacity", "certified", "certified_trained")
FIT_ACCURACY = 0.99


def summarize(frames: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """One row per replica, sweeps in the given order."""
    return pd.concat(list(frames), ignore_index=True)


def capacity_table(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per setting and seed: capacity estimates and certified capacities."""
    rows = []
    for key, group in summary.groupby(SETTING, sort=True):
        best = group.loc[group["memorized"].idxmax()]
        top = group.loc[group["T"].idxmax()]
        fitted = group.loc[group["accuracy"] >= FIT_ACCURACY, "T"]
        rows.append(
            {
                **dict(zip(SETTING, key, strict=True)),
                "capacity": int(best["memorized"]),
                "T_at_capacity": int(best["T"]),
                "fitted_T": int(fitted.max()) if len(fitted) else 0,
                "certified": int(group["certified"].max()),
                "certified_trained": int(group["certified_trained"].max()),
                "T_max": int(top["T"]),
                "censored": bool(top["memorized"] >= _censor_level(top) * top["T"]),
                "largest_drop": largest_drop(group),
                "under_trained": bool(
                    best["accuracy"] < 1.0 and best.get("late_loss_drop", 0.0) > STILL_FALLING
                ),
                "budget": int(best.get("budget", 0)),
                "convergence_gain": float(group.get("convergence_gain", _NAN).iloc[0]),
                "optimiser_limited": bool(group.get("optimiser_limited", _FALSE).iloc[0]),
            }
        )
    return pd.DataFrame(rows)


_NAN = pd.Series([float("nan")])
_FALSE = pd.Series([False])
ESTIMATE_KEYS = ["sweep", "swept", "value", "H", "n", "d_h", "context", "task", "bound"]


def estimate_table(capacity: pd.DataFrame) -> pd.DataFrame:
    """One row per setting: the seed mean of the capacity ± its standard error (the estimate
    the laws are decided on), the seeds listed, the best seed beside them, and the setting's
    flags (censored: any seed; the convergence check's gain and outcome)."""
    rows = []
    for key, group in capacity.groupby(ESTIMATE_KEYS, sort=True):
        values = group.sort_values("seed")["capacity"].astype(float)
        rows.append(
            {
                **dict(zip(ESTIMATE_KEYS, key, strict=True)),
                "seeds": len(values),
                "capacity_mean": round(float(values.mean()), 2),
                "capacity_se": round(float(values.sem()), 2) if len(values) > 1 else float("nan"),
                "capacity_seeds": " ".join(str(int(v)) for v in values),
                "capacity_best": int(values.max()),
                "censored": bool(group["censored"].any()),
                "convergence_gain": float(group["convergence_gain"].iloc[0]),
                "optimiser_limited": bool(group["optimiser_limited"].iloc[0]),
            }
        )
    return pd.DataFrame(rows)


def _censor_level(row: pd.Series) -> float:
    """:func:`~memcap.synthetic.settings.censor_level` of the row's ladder (none: NaN)."""
    grow_at = row.get("grow_at", float("nan"))
    return censor_level(None if pd.isna(grow_at) else float(grow_at))


def largest_drop(series: pd.DataFrame) -> float:
    """The largest fall of one series' memorized count along T, as a fraction of the count
    before it (0 when it never falls)."""
    counts = series.sort_values("T")["memorized"].astype(float)
    before = counts.cummax().shift(1)
    falls = ((before - counts) / before).where(before > 0)
    return round(max(0.0, float(falls.max())) if falls.notna().any() else 0.0, 4)


def bound_ratios(capacity: pd.DataFrame) -> pd.DataFrame:
    """Trained counts against Theorem 1's H(n−1)+1, per sweep, task and context kind: the
    range and median over settings of each setting's best seed over its bound."""
    best = capacity.groupby(["sweep", "task", "context", "value"], sort=True).agg(
        capacity=("capacity", "max"), bound=("bound", "first")
    )
    best["ratio"] = best["capacity"] / best["bound"]
    table = best.groupby(["sweep", "task", "context"], sort=True)["ratio"].agg(
        ["min", "median", "max"]
    )
    table["below_bound"] = (best["ratio"] < 1).groupby(["sweep", "task", "context"]).sum()
    return table.rename(columns=lambda c: c if c == "below_bound" else f"ratio_{c}").reset_index()


def fit_table(capacity: pd.DataFrame) -> pd.DataFrame:
    """Linear fits of every capacity quantity against the swept value.

    One row per sweep, context, task and quantity. The d_h sweep is fitted over d_h ≤ n only:
    Theorem 1 predicts growth up to d_h = n and none beyond.
    """
    rows = []
    for (sweep, swept, context, task), group in capacity.groupby(
        ["sweep", "swept", "context", "task"], sort=True
    ):
        if sweep == "head_dim":
            group = group[group["d_h"] <= group["n"]]
        for quantity in QUANTITIES:
            slope, intercept, r2 = linear_fit(group["value"], group[quantity])
            rows.append(
                {
                    "sweep": sweep,
                    "swept": swept,
                    "context": context,
                    "task": task,
                    "quantity": quantity,
                    "slope": slope,
                    "intercept": intercept,
                    "r2": r2,
                    "points": len(group),
                    "x_min": group["value"].min(),
                    "x_max": group["value"].max(),
                }
            )
    return pd.DataFrame(rows)


def saturation_table(saturation: pd.DataFrame) -> pd.DataFrame:
    """Per setting and T: mean, min and max per-head saturation over heads and seeds."""
    keys = ["sweep", "H", "n", "d_h", "context", "task", "T"]
    table = saturation.groupby(keys, sort=True)["saturation"].agg(["mean", "min", "max"])
    return table.rename(columns=lambda c: f"saturation_{c}").reset_index()


def describe_fits(fits: pd.DataFrame) -> str:
    """The fits as aligned text lines for logs."""
    lines = []
    for row in fits.itertuples():
        lines.append(
            f"{row.sweep:<12} {row.context:<6} {row.task:<14} {row.quantity:<17} "
            f"{row.quantity} ≈ {row.slope:7.2f}·{row.swept} + {row.intercept:7.2f}  "
            f"R²={row.r2:.3f}  ({row.points} points, {row.swept} in [{row.x_min}, {row.x_max}])"
        )
    return "\n".join(lines)
