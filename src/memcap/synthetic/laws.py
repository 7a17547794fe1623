"""Paper A's three scaling laws checked on this run's capacity estimates, one row per curve.

Theorem 1 with its construction predicts capacity linear in H, growing with the context size
n, and growing with the head dimension d_h up to d_h = n with no change beyond it.

Every law is checked twice per curve, on each setting's **best seed** and on its **seed
mean** (``ESTIMATES``; the curve column names which). The best seed is the tightest estimate:
every seed is a restart (fresh data and initialisation) whose memorized count is met by real
weights, so training can only under-estimate the capacity. The seed mean shows the law is not
an artefact of picking the best restart: a law that holds on best seeds only rests on lucky
restarts. The checks (on ``capacity_table`` rows):

- ``linear in H``: R² of the least-squares line through the estimates at least ``R2_MIN``;
- ``grows with n`` and ``grows with d_h up to n``: no estimate more than ``TOLERANCE`` below
  the largest at a smaller value, and the last above the first;
- ``flat in d_h beyond n``: no estimate beyond n more than ``TOLERANCE`` below the one at the
  largest d_h ≤ n (Theorem 1 predicts no gain beyond n and no loss either; a rise is
  reported, not failed: more parameters may memorize more than the theorem guarantees).

``TOLERANCE`` is the optimiser noise the checks allow ("no drop of more than 10%").

A law never passes on a censored estimate (``capacity_table``'s ``censored``: the grid, not
the model, bounds it): a curve with a censored point gets the outcome ``censored``, and
``holds`` is false. The best seed's estimate is censored when that seed's is; the seed mean
when any seed's is.
"""

from __future__ import annotations

import pandas as pd

from memcap.synthetic.bounds import linear_fit
from memcap.synthetic.settings import SWEPT

R2_MIN = 0.95
TOLERANCE = 0.10
COLUMNS = ["law", "sweep", "curve", "criterion", "measured", "outcome", "holds"]
# The estimates every law is checked on: column of ``estimates`` -> how rows name it.
ESTIMATES = {"best": "best seed", "mean": "seed mean"}


def law_table(capacity: pd.DataFrame) -> pd.DataFrame:
    """One row per law, curve (sweep, context, task) and estimate (best seed, seed mean)."""
    rows = []
    for (sweep, context, task), group in capacity.groupby(["sweep", "context", "task"], sort=True):
        stats = estimates(group)
        n = int(group["n"].iloc[0])
        for column, name in ESTIMATES.items():
            curve = {"sweep": sweep, "curve": f"{context} context, {task}, {name}s"}
            for row in _checks(sweep, stats, column, name, n):
                rows.append({**curve, **_censored(row, stats, column, sweep)})
    return pd.DataFrame(rows, columns=COLUMNS)


def estimates(group: pd.DataFrame) -> pd.DataFrame:
    """Best seed, mean, standard deviation and seed count of the capacity, by swept value,
    and whether each estimate is censored (best: the best seed's; mean: any seed's)."""
    by_value = group.groupby("value")
    stats = by_value["capacity"].agg(["max", "mean", "std", "count"]).sort_index()
    stats = stats.rename(columns={"max": "best"}).fillna({"std": 0.0})
    censored = group.get("censored", pd.Series(False, index=group.index)).astype(bool)
    best_rows = by_value["capacity"].idxmax().reindex(stats.index)
    stats["best_censored"] = censored.loc[best_rows.to_numpy()].to_numpy()
    stats["mean_censored"] = censored.groupby(group["value"]).any().reindex(stats.index)
    return stats


def _censored(row: dict, stats: pd.DataFrame, column: str, sweep: str) -> dict:
    """``row`` with its outcome: censored where a point of its curve is, else holds / fails."""
    flags = stats[f"{column}_censored"].to_numpy()
    if flags.any():
        where = ", ".join(str(v) for v in stats.index[flags])
        measured = f"{row['measured']}; censored at {SWEPT[sweep]} = {where}"
        return {**row, "measured": measured, "outcome": "censored", "holds": False}
    return {**row, "outcome": "holds" if row["holds"] else "fails"}


def _checks(sweep: str, stats: pd.DataFrame, column: str, name: str, n: int) -> list[dict]:
    """The law rows of one curve on the estimate ``column`` (``name`` in the criteria)."""
    if sweep == "heads":
        return [_linear(stats, column, name)]
    if sweep == "context_size":
        return [_grows(stats, column, name, "grows with n", "n")]
    if sweep != "head_dim":
        return []
    below, beyond = stats[stats.index <= n], stats[stats.index > n]
    rows = []
    if len(below) >= 2:
        rows.append(_grows(below, column, name, "grows with d_h up to n", "d_h"))
    if len(below) and len(beyond):
        rows.append(_flat(below.iloc[-1], beyond, column, name, n))
    return rows


def _linear(stats: pd.DataFrame, column: str, name: str) -> dict:
    slope, _, r2 = linear_fit(stats.index.to_numpy(), stats[column].to_numpy())
    return {
        "law": "linear in H",
        "criterion": f"R² ≥ {R2_MIN} of the line through the {name}s against H",
        "measured": (
            f"R² = {r2:.3f}, slope {slope:.1f} examples per head; {_describe(stats, column, 'H')}"
        ),
        "holds": bool(r2 >= R2_MIN),
    }


def _grows(stats: pd.DataFrame, column: str, name: str, law: str, swept: str) -> dict:
    values = stats[column].astype(float)
    worst = float((values / values.cummax().shift(1) - 1.0).min()) if len(values) > 1 else 0.0
    return {
        "law": law,
        "criterion": (
            f"no {name} more than {TOLERANCE:.0%} below a smaller {swept}'s; last above first"
        ),
        "measured": f"{_describe(stats, column, swept)}; largest fall {max(0.0, -worst):.1%}",
        "holds": bool(worst >= -TOLERANCE and values.iloc[-1] > values.iloc[0]),
    }


def _flat(reference: pd.Series, beyond: pd.DataFrame, column: str, name: str, n: int) -> dict:
    change = beyond[column] / reference[column] - 1.0
    return {
        "law": "flat in d_h beyond n",
        "criterion": (
            f"no {name} beyond d_h = n = {n} more than {TOLERANCE:.0%} below the one at "
            f"d_h = {reference.name}"
        ),
        "measured": f"{_point(reference, column)} at d_h = {reference.name}; "
        + ", ".join(
            f"{_point(row, column)} ({change[value]:+.0%}) at {value}"
            for value, row in beyond.iterrows()
        ),
        "holds": bool(change.min() >= -TOLERANCE),
    }


def _point(row: pd.Series, column: str) -> str:
    """One value's estimates, the checked one first."""
    if column == "mean":
        return f"mean {row['mean']:.1f} ± {row['std']:.1f} (best {row['best']:.0f})"
    return f"{row['best']:.0f} (mean {row['mean']:.1f} ± {row['std']:.1f})"


def _describe(stats: pd.DataFrame, column: str, swept: str) -> str:
    """The curve's estimates at every value, the checked one first."""
    seeds = int(stats["count"].max())
    values = ", ".join(str(v) for v in stats.index)
    best = ", ".join(f"{b:.0f}" for b in stats["best"])
    means = ", ".join(f"{m:.1f}" for m in stats["mean"])
    if column == "mean":
        return f"means of {seeds} seeds {means} at {swept} = {values} (best seeds {best})"
    return f"best of {seeds} seeds {best} at {swept} = {values} (means {means})"
