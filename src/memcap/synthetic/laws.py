"""Paper A's three scaling laws checked on this run's capacity estimates, one row per curve.

Theorem 1 with its construction predicts capacity linear in H, growing with the context size
n, and growing with the head dimension d_h up to d_h = n with no change beyond it.

A setting's estimate here is its **best seed**: every seed is a restart (fresh data and
initialisation) whose memorized count is met by real weights, so training can only
under-estimate the capacity, and the best restart is the tightest estimate the run has; the
seed mean and spread are given beside it. The checks (on ``capacity_table`` rows):

- ``linear in H``: R² of the least-squares line through the best seeds at least ``R2_MIN``;
- ``grows with n`` and ``grows with d_h up to n``: no estimate more than ``TOLERANCE`` below
  the largest at a smaller value, and the last above the first;
- ``flat in d_h beyond n``: no estimate beyond n more than ``TOLERANCE`` below the one at the
  largest d_h ≤ n (Theorem 1 predicts no gain beyond n and no loss either; a rise is
  reported, not failed: more parameters may memorize more than the theorem guarantees).

``TOLERANCE`` is the optimiser noise the checks allow ("no drop of more than 10%").
"""

from __future__ import annotations

import pandas as pd

from memcap.synthetic.bounds import linear_fit

R2_MIN = 0.95
TOLERANCE = 0.10
COLUMNS = ["law", "sweep", "curve", "criterion", "measured", "holds"]


def law_table(capacity: pd.DataFrame) -> pd.DataFrame:
    """One row per law and curve (sweep, context, task) the run has; COLUMNS."""
    rows = []
    for (sweep, context, task), group in capacity.groupby(["sweep", "context", "task"], sort=True):
        curve = {"sweep": sweep, "curve": f"{context} context, {task}"}
        stats = estimates(group)
        if sweep == "heads":
            rows.append({**curve, **_linear(stats)})
        elif sweep == "context_size":
            rows.append({**curve, **_grows(stats, "grows with n", "n")})
        elif sweep == "head_dim":
            n = int(group["n"].iloc[0])
            below, beyond = stats[stats.index <= n], stats[stats.index > n]
            if len(below) >= 2:
                rows.append({**curve, **_grows(below, "grows with d_h up to n", "d_h")})
            if len(below) and len(beyond):
                rows.append({**curve, **_flat(below.iloc[-1], beyond, n)})
    return pd.DataFrame(rows, columns=COLUMNS)


def estimates(group: pd.DataFrame) -> pd.DataFrame:
    """Best seed, mean, standard deviation and seed count of the capacity, by swept value."""
    stats = group.groupby("value")["capacity"].agg(["max", "mean", "std", "count"]).sort_index()
    return stats.rename(columns={"max": "best"}).fillna({"std": 0.0})


def _linear(stats: pd.DataFrame) -> dict:
    slope, _, r2 = linear_fit(stats.index.to_numpy(), stats["best"].to_numpy())
    return {
        "law": "linear in H",
        "criterion": f"R² ≥ {R2_MIN} of the line through the best seeds against H",
        "measured": f"R² = {r2:.3f}, slope {slope:.1f} examples per head; {_describe(stats, 'H')}",
        "holds": bool(r2 >= R2_MIN),
    }


def _grows(stats: pd.DataFrame, law: str, name: str) -> dict:
    best = stats["best"].astype(float)
    worst = float((best / best.cummax().shift(1) - 1.0).min()) if len(best) > 1 else 0.0
    return {
        "law": law,
        "criterion": (
            f"no best seed more than {TOLERANCE:.0%} below a smaller {name}'s; last above first"
        ),
        "measured": f"{_describe(stats, name)}; largest fall {max(0.0, -worst):.1%}",
        "holds": bool(worst >= -TOLERANCE and best.iloc[-1] > best.iloc[0]),
    }


def _flat(reference: pd.Series, beyond: pd.DataFrame, n: int) -> dict:
    change = beyond["best"] / reference["best"] - 1.0
    return {
        "law": "flat in d_h beyond n",
        "criterion": (
            f"no best seed beyond d_h = n = {n} more than {TOLERANCE:.0%} below the one at "
            f"d_h = {reference.name}"
        ),
        "measured": f"{_point(reference)} at d_h = {reference.name}; "
        + ", ".join(
            f"{_point(row)} ({change[value]:+.0%}) at {value}" for value, row in beyond.iterrows()
        ),
        "holds": bool(change.min() >= -TOLERANCE),
    }


def _point(row: pd.Series) -> str:
    return f"{row['best']:.0f} (mean {row['mean']:.1f} ± {row['std']:.1f})"


def _describe(stats: pd.DataFrame, name: str) -> str:
    seeds = int(stats["count"].max())
    values = ", ".join(str(v) for v in stats.index)
    return (
        f"best of {seeds} seeds {', '.join(f'{b:.0f}' for b in stats['best'])} at {name} = "
        f"{values} (means {', '.join(f'{m:.1f}' for m in stats['mean'])})"
    )
