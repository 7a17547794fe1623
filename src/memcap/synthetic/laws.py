"""Paper A's three scaling laws checked on this run's capacity estimates, one row per curve.

Theorem 1 with its construction predicts capacity linear in H, growing with the context size
n, and growing with the head dimension d_h up to d_h = n with no change beyond it. The checks
read the seed means of the capacity estimates (``capacity_table``) and the linear fits
(``fit_table``):

- ``linear in H``: R² of the capacity fit against H at least ``R2_MIN``;
- ``grows with n`` and ``grows with d_h up to n``: no seed mean falls more than ``TOLERANCE``
  below the largest mean at a smaller value, and the last mean exceeds the first;
- ``flat in d_h beyond n``: no seed mean beyond n more than ``TOLERANCE`` below the mean at
  the largest d_h ≤ n (Theorem 1 predicts no gain beyond n and no loss either; a rise is
  reported, not failed: more parameters may memorize more than the theorem guarantees).

``TOLERANCE`` is the optimiser's seed noise the checks allow ("no drop of more than 10%");
each row also gives the seed spread so the reader can judge it.
"""

from __future__ import annotations

import pandas as pd

R2_MIN = 0.95
TOLERANCE = 0.10
COLUMNS = ["law", "sweep", "curve", "criterion", "measured", "holds"]


def law_table(capacity: pd.DataFrame, fits: pd.DataFrame) -> pd.DataFrame:
    """One row per law and curve (sweep, context, task) the run has; COLUMNS."""
    rows = []
    for (sweep, context, task), group in capacity.groupby(["sweep", "context", "task"], sort=True):
        curve = {"sweep": sweep, "curve": f"{context} context, {task}"}
        means = seed_means(group)
        if sweep == "heads":
            rows.append({**curve, **_linear(fits, sweep, context, task)})
        elif sweep == "context_size":
            rows.append({**curve, **_grows(means, "grows with n", "n")})
        elif sweep == "head_dim":
            n = int(group["n"].iloc[0])
            below, beyond = means[means.index <= n], means[means.index > n]
            if len(below) >= 2:
                rows.append({**curve, **_grows(below, "grows with d_h up to n", "d_h")})
            if len(below) and len(beyond):
                rows.append({**curve, **_flat(below.iloc[-1], beyond, n)})
    return pd.DataFrame(rows, columns=COLUMNS)


def seed_means(group: pd.DataFrame) -> pd.DataFrame:
    """Mean and standard deviation of the capacity over seeds, indexed by the swept value."""
    stats = group.groupby("value")["capacity"].agg(["mean", "std", "count"]).sort_index()
    return stats.fillna({"std": 0.0})


def _linear(fits: pd.DataFrame, sweep: str, context: str, task: str) -> dict:
    match = fits[
        (fits["sweep"] == sweep)
        & (fits["context"] == context)
        & (fits["task"] == task)
        & (fits["quantity"] == "capacity")
    ]
    r2 = float(match["r2"].iloc[0]) if len(match) else float("nan")
    slope = float(match["slope"].iloc[0]) if len(match) else float("nan")
    return {
        "law": "linear in H",
        "criterion": f"R² ≥ {R2_MIN} of the capacity fit against H",
        "measured": f"R² = {r2:.3f}, slope {slope:.1f} examples per head",
        "holds": bool(r2 >= R2_MIN),
    }


def _grows(means: pd.DataFrame, law: str, name: str) -> dict:
    running = means["mean"].cummax().shift(1)
    worst = float((means["mean"] / running - 1.0).min()) if len(means) > 1 else 0.0
    holds = worst >= -TOLERANCE and means["mean"].iloc[-1] > means["mean"].iloc[0]
    return {
        "law": law,
        "criterion": (
            f"no seed mean more than {TOLERANCE:.0%} below a smaller {name}'s; last above first"
        ),
        "measured": f"{_describe(means, name)}; largest fall {max(0.0, -worst):.0%}",
        "holds": bool(holds),
    }


def _flat(reference: pd.Series, beyond: pd.DataFrame, n: int) -> dict:
    change = beyond["mean"] / reference["mean"] - 1.0
    worst = float(change.min())
    return {
        "law": "flat in d_h beyond n",
        "criterion": (
            f"no seed mean beyond d_h = n = {n} more than {TOLERANCE:.0%} below the mean at "
            f"d_h = {reference.name}"
        ),
        "measured": (
            f"{reference['mean']:.1f} ± {reference['std']:.1f} at d_h = {reference.name}; "
            + ", ".join(
                f"{row['mean']:.1f} ± {row['std']:.1f} ({change[value]:+.0%}) at {value}"
                for value, row in beyond.iterrows()
            )
        ),
        "holds": bool(worst >= -TOLERANCE),
    }


def _describe(means: pd.DataFrame, name: str) -> str:
    values = ", ".join(str(v) for v in means.index)
    return f"seed means {', '.join(f'{m:.1f}' for m in means['mean'])} at {name} = {values}"
