"""Collect the sweeps' rows into one table and fit the scaling laws (linear in H, quadratic in
d_h, piecewise linear in d with a knot at d_h, linear in the parameter count) on the points the
laws are tested on: every x whose seed mean stays below the accuracy's ceiling."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import pandas as pd

from memcap.aot import bounds
from memcap.training.fits import r_squared

FORMS = {"H": "linear", "d_h": "quadratic", "d": "hinge", "params": "linear"}
SHAPE_COLUMNS = ["N", "S", "d", "d_h", "H", "depth", "width", "temperature"]
SUMMARY_COLUMNS = [
    "sweep", "task", "model", "N", "S", "d", "d_h", "H", "depth", "width", "params", "T0",
    "temperature", "variant", "recipe", "metric", "seed", "accuracy", "accuracy_table",
    "accuracy_batches", "memorized", "kl", "entropy", "cross_entropy", "loss",
    "fit_step", "steps_run", "chance", "bound_ours", "bound_previous", "x_axis", "facet",
]  # fmt: skip


def summarize(frames: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """One row per setting × seed, sweeps in the given order."""
    table = pd.concat(list(frames), ignore_index=True)
    missing = set(SUMMARY_COLUMNS) - set(table.columns)
    if missing:
        raise ValueError(f"sweep tables lack columns {sorted(missing)}")
    return table[SUMMARY_COLUMNS]


def facet_groups(sweep: pd.DataFrame) -> Iterable[tuple[str, str, pd.DataFrame]]:
    """(model, facet label, rows) for each curve of one sweep."""
    facet = sweep["facet"].iloc[0]
    keys = [k for k in str(facet).split("|") if k and k != "nan"]
    for model, rows in sweep.groupby("model", sort=False):
        if not keys:
            yield model, "", rows
            continue
        for values, sub in rows.groupby(keys, sort=True):
            values = values if isinstance(values, tuple) else (values,)
            yield model, ", ".join(f"{k}={v}" for k, v in zip(keys, values, strict=True)), sub


def seed_means(rows: pd.DataFrame, x: str, column: str = "accuracy") -> pd.DataFrame:
    """Mean of ``column`` over seeds at each x (and the bounds there), sorted by x."""
    agg = {column: "mean", "chance": "mean", "bound_ours": "mean", "bound_previous": "mean"}
    return rows.groupby(x, as_index=False).agg(agg).sort_values(x)


def curve_form(rows: pd.DataFrame, x: str) -> tuple[str, float]:
    """The form fitted to one curve against ``x``, and its knot (hinge: the largest d_h)."""
    form = FORMS.get(x, "linear")
    return form, float(rows["d_h"].max()) if form == "hinge" else float("nan")


def fit_curve(rows: pd.DataFrame, x: str, all_points: bool = False) -> bounds.Fit | None:
    """The scaling-law fit of one curve: least squares over every seed's accuracy at the x
    whose seed mean stays below the ceiling ``bounds.SATURATION`` (the points and fit the
    law's lack-of-fit test uses, :mod:`memcap.aot.laws`), or over ``all_points``; its R² on
    the seed means of those x (1 where the x are as many as the form's coefficients: such a
    fit passes through them and its law is untestable). None where fewer x remain."""
    per_seed = rows.groupby([x, "seed"], as_index=False)["accuracy"].mean()
    means = per_seed.groupby(x)["accuracy"].mean()
    kept = means.index if all_points else means.index[means < bounds.SATURATION]
    form, knot = curve_form(rows, x)
    if len(kept) < bounds.COEFFICIENTS[form]:
        return None
    points = per_seed[per_seed[x].isin(kept)]
    fit = bounds.fit(points[x], points["accuracy"], form, knot)
    r2 = r_squared(means[kept].to_numpy(float), fit.predict(kept.to_numpy(float)))
    return replace(fit, r2=r2, n_points=len(kept))


def fit_table(summary: pd.DataFrame) -> pd.DataFrame:
    """One fit per sweep × model × facet: form, coefficients, slope and R² over the points
    below the ceiling (``n_points``; the points the laws test, ``censored`` names the x left
    out), and ``r2_all`` / ``n_all``: R² of the same form fitted over every point."""
    records = []
    for sweep_name, sweep in summary.groupby("sweep", sort=False):
        x = sweep["x_axis"].iloc[0]
        for model, label, rows in facet_groups(sweep):
            result = fit_curve(rows, x)
            if result is None:
                continue
            every = fit_curve(rows, x, all_points=True)
            means = seed_means(rows, x)
            left_out = means.loc[means["accuracy"] >= bounds.SATURATION, x]
            records.append(
                {
                    "sweep": sweep_name,
                    "model": model,
                    "facet": label,
                    "x_axis": x,
                    "form": result.form,
                    "intercept": result.coefficients[0],
                    "slope": result.slope,
                    "coefficients": ";".join(f"{c:.6g}" for c in result.coefficients),
                    "knot": result.knot,
                    "r2": result.r2,
                    "n_points": result.n_points,
                    "censored": " ".join(f"{v:g}" for v in left_out),
                    "equation": result.describe(x),
                    "r2_all": every.r2,
                    "n_all": every.n_points,
                }
            )
    return pd.DataFrame(records)
