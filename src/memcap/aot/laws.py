"""Paper B's findings checked on this run's AoT curves, one row per finding and curve.

- ``matches the authors' published accuracies``: every point of a published curve
  (``published.yaml`` beside this module) that this run also trained lies within the file's
  tolerance of their value (seed means of the association accuracy);
- ``above paper B's lower bound``: every seed mean of an association curve at least
  1/N + (1 − 1/N)(H·d_h + d)/T0;
- the fitted forms (``fit_table``): linear in H, quadratic in d_h, piecewise linear in d with
  its knot at d_h, each with R² ≥ ``R2_MIN`` over the points before saturation.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from memcap.aot.summary import facet_groups, seed_means

PUBLISHED_FILE = Path(__file__).with_name("published.yaml")
R2_MIN = 0.95
COLUMNS = ["law", "sweep", "curve", "criterion", "measured", "holds"]
FORM_LAWS = {
    "linear": "linear in H",
    "quadratic": "quadratic in d_h",
    "hinge": "piecewise linear in d (knot at d_h)",
}


@lru_cache(maxsize=1)
def published(path: str | Path = PUBLISHED_FILE) -> dict[str, Any]:
    """The authors' published curves, their source and the tolerance."""
    return yaml.safe_load(Path(path).read_text())


def law_table(
    summary: pd.DataFrame, fits: pd.DataFrame, reference: Mapping[str, Any] | None = None
) -> pd.DataFrame:
    """One row per finding and curve the run has; COLUMNS. ``reference``: ``published()``."""
    reference = published() if reference is None else reference
    association = summary[summary["task"] == "association"]
    rows = [_published(association, curve, reference["tolerance"]) for curve in reference["curves"]]
    for sweep, group in association.groupby("sweep", sort=False):
        for model, label, curve in facet_groups(group):
            rows.append(_above_bound(sweep, model, label, curve))
    rows += [
        _fitted(row)
        for row in fits.itertuples()
        if row.form in FORM_LAWS and row.sweep in set(association["sweep"])
    ]
    rows = [row for row in rows if row is not None]
    return pd.DataFrame(rows, columns=COLUMNS)


def _curve(model: str, label: str) -> str:
    return f"{model}, {label}" if label else model


def _published(summary: pd.DataFrame, curve: Mapping[str, Any], tolerance: float) -> dict | None:
    """Our seed means against the published points both have; None when none is shared."""
    mask = pd.Series(True, index=summary.index)
    for key, value in curve["setting"].items():
        mask &= summary[key] == value
    ours = summary[mask].groupby(curve["x"])["accuracy"].mean()
    theirs = {int(x): float(acc) for x, acc in curve["points"].items()}
    shared = [x for x in sorted(theirs) if x in ours.index]
    if not shared:
        return None
    gaps = {x: float(ours[x]) - theirs[x] for x in shared}
    worst = max(abs(g) for g in gaps.values())
    setting = ", ".join(
        f"{k} = {v}" for k, v in curve["setting"].items() if k not in ("model", "task")
    )
    return {
        "law": "matches the authors' published accuracies",
        "sweep": curve["sweep"],
        "curve": setting,
        "criterion": f"|ours − theirs| ≤ {tolerance} at every {curve['x']} both have",
        "measured": "; ".join(
            f"{curve['x']} = {x}: {ours[x]:.3f} vs {theirs[x]:.3f}" for x in shared
        )
        + f"; largest |Δ| {worst:.3f}",
        "holds": bool(worst <= tolerance),
    }


def _above_bound(sweep: str, model: str, label: str, rows: pd.DataFrame) -> dict | None:
    """Every seed mean at or above paper B's lower bound (AoT curves only)."""
    if model != "aot":
        return None
    x = rows["x_axis"].iloc[0]
    means = seed_means(rows, x)
    margin = means["accuracy"] - means["bound_ours"]
    low = int(margin.idxmin())
    return {
        "law": "above paper B's lower bound",
        "sweep": sweep,
        "curve": _curve(model, label),
        "criterion": "seed-mean accuracy ≥ 1/N + (1 − 1/N)(H·d_h + d)/T0 at every point",
        "measured": (
            f"smallest margin {margin[low]:+.3f} at {x} = {means.loc[low, x]} "
            f"({means.loc[low, 'accuracy']:.3f} vs {means.loc[low, 'bound_ours']:.3f})"
        ),
        "holds": bool((margin >= 0).all()),
    }


def _fitted(fit: Any) -> dict | None:
    """The fitted form's R² (AoT curves; the MLP and per-parameter fits are not paper B's laws)."""
    if fit.model != "aot" or fit.x_axis not in ("H", "d_h", "d"):
        return None
    return {
        "law": FORM_LAWS[fit.form],
        "sweep": fit.sweep,
        "curve": _curve(fit.model, fit.facet if isinstance(fit.facet, str) else ""),
        "criterion": f"R² ≥ {R2_MIN} over the points before saturation",
        "measured": f"R² = {fit.r2:.3f} over {fit.n_points} points: {fit.equation}",
        "holds": bool(fit.r2 >= R2_MIN),
    }
