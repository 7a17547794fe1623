"""Paper B's findings checked on this run's AoT curves, one row per finding and curve.

- ``matches the authors' published accuracies``: every point of a published curve
  (``published.yaml`` beside this module) that this run also trained lies within the file's
  tolerance of their value (seed means of the association accuracy);
- ``above paper B's lower bound``: every seed mean of an association curve at least
  1/N + (1 − 1/N)(H·d_h + d)/T0 (the row also gives the smallest margin over the previous
  bound 1/N + (1 − 1/N)(H(d_h − 1) + 1)/T0, which paper B's bound exceeds);
- ``AoT and MLP-Transformer alike per parameter``: in a sweep with both models, the k-th
  smallest AoT and MLP-Transformer of a facet (MLP width 2·d·(H − 1): parameter counts equal
  for the paper's variant, within 4% for the authors'), compared seed by seed (a seed's AoT and
  MLP-Transformer share its task and sample): the mean difference Δ and its seed spread s, the
  standard error of that mean (the standard deviation of the per-seed differences over √n).
  A pair is *alike* when |Δ| ≤ ``SIMILAR`` and s ≤ ``SIMILAR``, *differs* when
  |Δ| > ``SIMILAR`` + s, else (or with one seed, no spread) *inconclusive*. The facet holds
  when every pair is alike, fails when one differs, else is inconclusive;
- the forms of paper B's figures: linear in H, quadratic in d_h, piecewise linear in d with
  its knot at d_h, each with R² ≥ ``R2_MIN`` over the seed means at **every** point of the
  curve, saturated ones included (tested where the curve has a point more than the form has
  coefficients). The ``fits.csv`` fits drawn on the figures keep the authors' plotting rule
  (up to the first point at ``bounds.SATURATION``); the law's verdict does not.

``outcome`` is ``holds``, ``fails`` or ``inconclusive`` (the AoT-vs-MLP rows only); ``holds``
is true only for ``holds``.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from memcap.aot import bounds
from memcap.aot.summary import curve_form, facet_groups, seed_means

PUBLISHED_FILE = Path(__file__).with_name("published.yaml")
R2_MIN = 0.95
SIMILAR = 0.05
COLUMNS = ["law", "sweep", "curve", "criterion", "measured", "outcome", "holds"]
FORM_LAWS = {
    "linear": "linear in H",
    "quadratic": "quadratic in d_h",
    "hinge": "piecewise linear in d (knot at d_h)",
}


@lru_cache(maxsize=1)
def published(path: str | Path = PUBLISHED_FILE) -> dict[str, Any]:
    """The authors' published curves, their source and the tolerance."""
    return yaml.safe_load(Path(path).read_text())


def law_table(summary: pd.DataFrame, reference: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """One row per finding and curve the run has; COLUMNS. ``reference``: ``published()``."""
    reference = published() if reference is None else reference
    association = summary[summary["task"] == "association"]
    rows = [_published(association, curve, reference["tolerance"]) for curve in reference["curves"]]
    for sweep, group in association.groupby("sweep", sort=False):
        curves = list(facet_groups(group))
        for model, label, curve in curves:
            rows.append(_above_bound(sweep, model, label, curve))
        rows += [_alike(sweep, label, curve, curves) for model, label, curve in curves]
        rows += [_form(sweep, model, label, curve) for model, label, curve in curves]
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
        **_verdict(worst <= tolerance),
    }


def _above_bound(sweep: str, model: str, label: str, rows: pd.DataFrame) -> dict | None:
    """Every seed mean at or above paper B's lower bound (AoT curves only); the smallest
    margin over the previous bound beside it."""
    if model != "aot":
        return None
    x = rows["x_axis"].iloc[0]
    means = seed_means(rows, x)
    margin = means["accuracy"] - means["bound_ours"]
    low = int(margin.idxmin())
    previous = means["accuracy"] - means["bound_previous"]
    below = means.loc[previous < 0, x].tolist()
    prev = int(previous.idxmin())
    return {
        "law": "above paper B's lower bound",
        "sweep": sweep,
        "curve": _curve(model, label),
        "criterion": "seed-mean accuracy ≥ 1/N + (1 − 1/N)(H·d_h + d)/T0 at every point",
        "measured": (
            f"smallest margin {margin[low]:+.3f} at {x} = {means.loc[low, x]} "
            f"({means.loc[low, 'accuracy']:.3f} vs {means.loc[low, 'bound_ours']:.3f}); "
            f"over the previous bound H(d_h − 1) + 1 {previous[prev]:+.3f} at "
            f"{x} = {means.loc[prev, x]}"
            + (f", below it at {x} = {', '.join(str(v) for v in below)}" if below else "")
        ),
        **_verdict(bool((margin >= 0).all())),
    }


def _alike(sweep: str, label: str, aot: pd.DataFrame, curves: list) -> dict | None:
    """The AoT curve against the MLP-Transformer curve of the same facet, pair by pair."""
    mlp = [rows for model, other, rows in curves if model == "mlp" and other == label]
    if aot["model"].iloc[0] != "aot" or not mlp:
        return None
    pairs = paired_differences(aot, mlp[0])
    verdicts = [alike_verdict(p["difference"], p["spread"]) for p in pairs]
    if "differ" in verdicts:
        outcome = "fails"
    elif all(v == "alike" for v in verdicts):
        outcome = "holds"
    else:
        outcome = "inconclusive"
    seeds = sorted({p["seeds"] for p in pairs})
    return {
        "law": "AoT and MLP-Transformer alike per parameter",
        "sweep": sweep,
        "curve": label or "all",
        "criterion": (
            f"at each matched parameter count, AoT − MLP over seeds Δ ± s (s: standard error "
            f"of the mean paired difference): alike if |Δ| ≤ {SIMILAR} and s ≤ {SIMILAR}, "
            f"differ if |Δ| > {SIMILAR} + s, else inconclusive"
        ),
        "measured": "; ".join(
            f"{p['params_aot']:.0f} / {p['params_mlp']:.0f} parameters: "
            f"{p['aot']:.3f} vs {p['mlp']:.3f}, Δ {p['difference']:+.3f} ± "
            + ("n/a" if np.isnan(p["spread"]) else f"{p['spread']:.3f}")
            + f" ({verdict})"
            for p, verdict in zip(pairs, verdicts, strict=True)
        )
        + f"; {'/'.join(str(n) for n in seeds)} seed(s)",
        "outcome": outcome,
        "holds": outcome == "holds",
    }


def paired_differences(aot: pd.DataFrame, mlp: pd.DataFrame) -> list[dict[str, Any]]:
    """The k-th smallest AoT against the k-th smallest MLP-Transformer (by parameter count):
    seed means, the mean over shared seeds of AoT − MLP and its standard error (nan with one
    seed)."""
    out = []
    aot_params = sorted(aot["params"].unique())
    mlp_params = sorted(mlp["params"].unique())
    for a_params, m_params in zip(aot_params, mlp_params, strict=False):
        a = aot[aot["params"] == a_params].groupby("seed")["accuracy"].mean()
        m = mlp[mlp["params"] == m_params].groupby("seed")["accuracy"].mean()
        diffs = (a - m).dropna().to_numpy(float)
        n = len(diffs)
        out.append(
            {
                "params_aot": float(a_params),
                "params_mlp": float(m_params),
                "aot": float(a.mean()),
                "mlp": float(m.mean()),
                "seeds": n,
                "difference": float(diffs.mean()) if n else float("nan"),
                "spread": float(diffs.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan"),
            }
        )
    return out


def alike_verdict(difference: float, spread: float, similar: float = SIMILAR) -> str:
    """``alike``, ``differ`` or ``inconclusive`` for one pair's Δ and seed spread s: alike if
    |Δ| ≤ similar and s ≤ similar; differ if |Δ| > similar + s; else (or s unknown:
    one seed) inconclusive."""
    if np.isnan(difference) or np.isnan(spread):
        return "inconclusive"
    if abs(difference) <= similar and spread <= similar:
        return "alike"
    if abs(difference) > similar + spread:
        return "differ"
    return "inconclusive"


def _form(sweep: str, model: str, label: str, rows: pd.DataFrame) -> dict | None:
    """R² of the AoT curve's form (by its x axis) over the seed means at every point."""
    x = rows["x_axis"].iloc[0]
    if model != "aot" or x not in ("H", "d_h", "d"):  # per parameter: no form claimed
        return None
    form, knot = curve_form(rows, x)
    means = seed_means(rows, x)
    if means[x].nunique() <= bounds.COEFFICIENTS[form]:  # an R² needs a point more than that
        return None
    result = bounds.fit(means[x], means["accuracy"], form, knot)
    saturated = means.loc[means["accuracy"] >= bounds.SATURATION, x].tolist()
    return {
        "law": FORM_LAWS[form],
        "sweep": sweep,
        "curve": _curve(model, label),
        "criterion": f"R² ≥ {R2_MIN} over the seed means at every point (none dropped)",
        "measured": f"{result.describe(x)} over {result.n_points} points"
        + (
            f" ({len(saturated)} at or above {bounds.SATURATION}: {x} = "
            f"{', '.join(str(v) for v in saturated)})"
            if saturated
            else ""
        ),
        **_verdict(result.r2 >= R2_MIN),
    }


def _verdict(holds: bool) -> dict[str, Any]:
    return {"outcome": "holds" if holds else "fails", "holds": bool(holds)}
