"""From per-replica sweep rows to capacity estimates, linear fits and saturation tables.

Capacity of a series (setting and seed): the most examples memorized at any T it trained at,
``capacity = max_T memorized(T)``, by either budget of the protocol
(:mod:`memcap.synthetic.series`): a count of training examples the trained model gets
exactly right, *memorized by this recipe* and so a lower bound on the model's capacity (paper
A's plotted notion; it depends on how far the T grid goes). Beside it ``fitted_T``, the
largest T fitted exactly (every example memorized: the theorem's notion). A capacity is
``bracketed`` when a larger T than the one that reached it was tried and memorized no more,
or, on a ladder that goes past the maximum, when its largest T memorized above chance no
more than ``RISE`` (5%) over every smaller T (the count has levelled off); otherwise it is
shown as "≥". ``capacity_low`` and ``capacity_high`` bracket the most-memorized count: the
count itself, and the count again where it is bracketed (NaN where it is not: right-censored;
a T between two rungs may still memorize more). Certified capacities are maxima over the
grid too; since the datasets of a grid are nested that is their value at the largest T.

A series is ``censored`` when its largest T is memorized at or above the ladder's level
(``grow_at``; every example where the grid does not grow): the grid, not the model, bounds
its estimate, and the laws take it as right-censored.
``largest_drop`` is the largest fall of the memorized count from a smaller T to a larger one,
as a fraction of the smaller T's count; ``drop_inside`` the same below the series' largest T
(past the maximum the ladder stops at the first T that memorizes no more, so a fall at the
largest T is how the count is bracketed; one inside the grid is the optimiser's).
``fitted_T_low`` and ``fitted_T_high`` bracket ``fitted_T``: the largest T fitted and the
smallest larger T tried that was not (NaN where none was tried); it is *measured* when they
are at most 1.25× (or one example) apart, the bracket's geometric midpoint ``fitted_T_mid``
standing for it, else ``fitted_censored`` (:func:`fitted_bracket`). ``fitted_at_chance``: no
more than one constant output fits of nested random labels (:func:`~memcap.synthetic.chance.
fitted_chance`). ``bracket`` is the ratio the protocol bisected to (NaN: no bisection).

A capacity is **at chance** when it is at or below ``chance_high``, the upper 95% quantile of
what a constant output counts at the capacity's T (:mod:`memcap.synthetic.chance`; ``chance``
is its expectation): it is shown as "chance (count)" and the laws leave its value out.
``bound`` is Theorem 1's H(n−1)+1 where d_h ≥ n, and its construction's H(d_h−1)+1 below
(``bound_kind`` says which, :mod:`memcap.theory`).

**Optimiser-limited** is decided per setting on every seed (:func:`convergence_decision`):
each seed's relative gain g_s from the convergence check's longer budget, their mean and its
two-sided (1 − 2α) t-interval (α = 0.05): ``optimiser-limited`` when the interval lies above
the margin ``synthetic.convergence.gain``, ``not limited`` when it lies below, else
``undetermined``. Every seed's capacity counts both budgets either way, so a limited setting
is a recipe's lower bound, not the model's capacity.

A setting is flagged ``under_trained`` when the replica that sets its capacity did not fit
its data and its training loss still fell by more than ``STILL_FALLING`` (5%) over the last
fifth of its evaluations (:mod:`memcap.training.plateau`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from memcap.synthetic.bounds import linear_fit
from memcap.synthetic.series import censor_level, rises
from memcap.theory import THEOREM
from memcap.training.plateau import STILL_FALLING

SETTING = ["sweep", "swept", "value", "H", "n", "d_h", "context", "task", "seed", "bound"]
QUANTITIES = ("capacity", "certified", "certified_trained")
ALPHA = 0.05  # each side of the convergence decision's interval
MEASURED = 1.25  # fitted_T is measured when a fitted T and an unfitted one are this close


def summarize(frames: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """One row per replica, sweeps in the given order."""
    return pd.concat(list(frames), ignore_index=True)


def capacity_table(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per setting and seed: capacity estimates, certified capacities, the seed's
    convergence gain and its setting's decision (:func:`convergence_decision`)."""
    rows = []
    for key, group in summary.groupby(SETTING, sort=True):
        group = group.sort_values("T")
        best = group.loc[group["memorized"].idxmax()]  # the first, smallest T, on a tie
        top = group.iloc[-1]
        fit = group["memorized"] >= group["T"]
        fitted_T = int(group.loc[fit, "T"].max()) if fit.any() else 0
        unfitted = group.loc[~fit & (group["T"] > fitted_T), "T"]
        bracketed = _bracketed(group, best, top)
        capacity = int(best["memorized"])
        chance = float(best.get("chance", _NAN_VALUE))
        chance_high = float(best.get("chance_high", _NAN_VALUE))
        at_chance = bool(capacity <= chance_high)  # False where no chance was recorded (NaN)
        rows.append(
            {
                **dict(zip(SETTING, key, strict=True)),
                "capacity": capacity,
                "capacity_shown": _shown(capacity, bracketed, at_chance),
                "bracketed": bracketed,
                "capacity_low": capacity,
                "capacity_high": capacity if bracketed else _NAN_VALUE,
                "T_at_capacity": int(best["T"]),
                "fitted_T": fitted_T,
                **fitted_bracket(fitted_T, int(unfitted.min()) if len(unfitted) else None),
                "fitted_at_chance": bool(fitted_T <= float(best.get("fitted_chance_high", -1))),
                "bracket": float(best.get("bracket", _NAN_VALUE)),
                "chance": chance,
                "chance_high": chance_high,
                "at_chance": at_chance,
                "bound_kind": str(group.get("bound_kind", _KIND).iloc[0]),
                "certified": int(group["certified"].max()),
                "certified_trained": int(group["certified_trained"].max()),
                "T_max": int(top["T"]),
                "censored": bool(top["memorized"] >= _censor_level(top) * top["T"]),
                "largest_drop": largest_drop(group),
                "drop_inside": largest_drop(group[group["T"] < top["T"]]),
                "under_trained": bool(
                    best["accuracy"] < 1.0 and best.get("late_loss_drop", 0.0) > STILL_FALLING
                ),
                "budget": int(best.get("budget", 0)),
                "convergence_gain": float(group.get("convergence_gain", _NAN).iloc[0]),
                "convergence_margin": float(group.get("convergence_margin", _NAN).iloc[0]),
            }
        )
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    decisions = {
        key: convergence_decision(group["convergence_gain"], group["convergence_margin"].iloc[0])
        for key, group in table.groupby(ESTIMATE_KEYS, sort=False)
    }
    settings = table[ESTIMATE_KEYS].itertuples(index=False, name=None)
    decided = pd.DataFrame([decisions[key] for key in settings], index=table.index)
    return pd.concat([table, decided], axis=1)


def fitted_bracket(low: int, high: int | None) -> dict[str, Any]:
    """``fitted_T``'s bracket: ``fitted_T_low`` (the largest T fitted) and ``fitted_T_high``
    (the next T tried and not fitted; NaN: none); ``fitted_T_mid``, their geometric midpoint
    (0 where not even one example was fitted), the value the laws take; and
    ``fitted_censored``: not measured (no unfitted T above it, or the ends more than
    ``MEASURED`` apart), left out of the laws."""
    if high is None:
        return {"fitted_T_low": low, "fitted_T_high": _NAN_VALUE, "fitted_T_mid": _NAN_VALUE,
                "fitted_censored": True}  # fmt: skip
    mid = 0.0 if low == 0 and high == 1 else math.sqrt(low * high)
    measured = high - low <= 1 or (low > 0 and high <= MEASURED * low)
    return {"fitted_T_low": low, "fitted_T_high": high, "fitted_T_mid": round(mid, 2),
            "fitted_censored": not measured}  # fmt: skip


def _shown(capacity: int, bracketed: bool, at_chance: bool) -> str:
    """A seed's capacity as the report shows it: "chance (11)" at or below chance, "≥ 57"
    where no larger T memorized fewer, else the count."""
    if at_chance:
        return f"chance ({capacity})"
    return f"{'' if bracketed else '≥ '}{capacity}"


@dataclass(frozen=True)
class ConvergenceDecision:
    """One setting's convergence decision on its seeds' paired gains."""

    gain_mean: float
    gain_low: float  # (1 − 2·ALPHA) t-interval of the mean gain
    gain_high: float
    convergence: str  # optimiser-limited, not limited, undetermined or not checked
    optimiser_limited: bool


def convergence_decision(gains: Iterable[float], margin: float) -> dict[str, Any]:
    """Whether a setting is optimiser-limited, from every seed's relative gain: the mean gain's
    (1 − 2·ALPHA) t-interval above ``margin`` (limited), below it (not limited), else
    undetermined; one seed or no check: no interval."""
    values = np.asarray([g for g in gains if np.isfinite(g)], dtype=float)
    if len(values) == 0 or not np.isfinite(margin):
        nan = float("nan")
        return asdict(ConvergenceDecision(nan, nan, nan, "not checked", False))
    mean = float(values.mean())
    if len(values) < 2:
        return asdict(ConvergenceDecision(mean, mean, mean, "undetermined (one seed)", False))
    from scipy import stats  # here: the report imports this module, and SciPy costs seconds

    half = float(stats.t.ppf(1 - ALPHA, len(values) - 1) * stats.sem(values))
    low, high = mean - half, mean + half
    outcome = (
        "optimiser-limited"
        if low > margin
        else "not limited"
        if high < margin
        else ("undetermined")
    )
    rounded = (round(mean, 4), round(low, 4), round(high, 4))
    return asdict(ConvergenceDecision(*rounded, outcome, outcome == "optimiser-limited"))


_NAN = pd.Series([float("nan")])
_NAN_VALUE = float("nan")
_KIND = pd.Series([THEOREM])  # tables written before the bound's kind was recorded
_FALSE = pd.Series([False])
ESTIMATE_KEYS = ["sweep", "swept", "value", "H", "n", "d_h", "context", "task", "bound"]


def estimate_table(capacity: pd.DataFrame) -> pd.DataFrame:
    """One row per setting: the seed mean of the capacity ± its standard error (the estimate
    the laws are decided on; "≥" unless every seed's capacity is bracketed), the seeds listed
    ("≥" where unbracketed), the best seed beside them, the seeds' fitted_T, and the setting's
    flags (censored: any seed; the convergence decision on every seed's gain)."""
    rows = []
    decision = list(ConvergenceDecision.__dataclass_fields__)
    for key, group in capacity.groupby(ESTIMATE_KEYS, sort=True):
        group = group.sort_values("seed")
        values = group["capacity"].astype(float)
        mean = round(float(values.mean()), 2)
        se = round(float(values.sem()), 2) if len(values) > 1 else float("nan")
        bracketed = int(group["bracketed"].sum())
        at_chance = int(group.get("at_chance", _FALSE).sum())
        shown = f"{'' if bracketed == len(group) else '≥ '}{mean:.1f} ± {se:.1f}"
        rows.append(
            {
                **dict(zip(ESTIMATE_KEYS, key, strict=True)),
                "seeds": len(values),
                "capacity_mean": mean,
                "capacity_se": se,
                "capacity_shown": f"chance ({shown})" if at_chance == len(group) else shown,
                "bracketed_seeds": bracketed,
                "at_chance_seeds": at_chance,
                "capacity_seeds": " ".join(group["capacity_shown"]),
                "capacity_best": int(values.max()),
                "fitted_T_seeds": " ".join(str(int(v)) for v in group["fitted_T"]),
                **_fitted_estimate(group),
                "censored": bool(group["censored"].any()),
                **{column: group[column].iloc[0] for column in decision},
            }
        )
    return pd.DataFrame(rows)


def _fitted_estimate(group: pd.DataFrame) -> dict[str, Any]:
    """A setting's fitted_T over its measured seeds: the bracket midpoints' mean ± standard
    error (``fitted_T_shown``: "≥" where a seed is censored, "chance (…)" where every seed's
    fitted_T is at chance), and how many seeds are measured."""
    if "fitted_T_mid" not in group:
        return {}
    censored = group["fitted_censored"].astype(bool)
    mids = group.loc[~censored, "fitted_T_mid"].astype(float)
    mean = round(float(mids.mean()), 2) if len(mids) else float("nan")
    se = round(float(mids.sem()), 2) if len(mids) > 1 else float("nan")
    shown = f"{'≥ ' if censored.any() else ''}{mean:.1f} ± {se:.1f}"
    at_chance = group.get("fitted_at_chance", _FALSE).astype(bool).all()
    return {
        "fitted_T_mean": mean,
        "fitted_T_se": se,
        "fitted_T_shown": f"chance ({shown})" if at_chance else shown,
        "fitted_measured_seeds": int((~censored).sum()),
    }


def _bracketed(series: pd.DataFrame, best: pd.Series, top: pd.Series) -> bool:
    """Whether a larger T than the capacity's memorized no more, or (a ladder past the
    maximum) the largest T no more than ``RISE`` above every smaller T's most."""
    if best["T"] < top["T"]:
        return True
    past_maximum = bool(top.get("past_maximum", False)) and not pd.isna(top.get("grow_at"))
    chance = series.get("chance", pd.Series(0.0, series.index)).fillna(0.0)
    above = dict(zip(series["T"], series["memorized"] - chance, strict=True))
    return past_maximum and len(above) > 1 and not rises(above, int(top["T"]))


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
    """Trained counts against the bound (H(n−1)+1, or H(d_h−1)+1 where d_h < n), per sweep,
    task and context kind: the range and median over settings of each setting's best seed over
    its bound."""
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

    One row per sweep, context, task and quantity, over the points the laws are decided on
    (:mod:`memcap.synthetic.laws`): a value where any seed is censored or at chance is left out
    (named in ``left_out``), and the d_h sweep is fitted over d_h ≤ n only (Theorem 1 predicts
    growth up to d_h = n and none beyond).
    """
    rows = []
    for (sweep, swept, context, task), group in capacity.groupby(
        ["sweep", "swept", "context", "task"], sort=True
    ):
        if sweep == "head_dim":
            group = group[group["d_h"] <= group["n"]]
        censored = group.get("censored", pd.Series(False, index=group.index)).astype(bool)
        censored |= group.get("at_chance", pd.Series(False, index=group.index)).astype(bool)
        left_out = sorted(set(group.loc[censored, "value"]))
        group = group[~group["value"].isin(left_out)]
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
                    "left_out": " ".join(str(v) for v in left_out),
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
