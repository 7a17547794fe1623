"""Paper B's findings decided on this run's AoT curves by tests on the seeds, one row per
finding and curve (:mod:`memcap.laws`; every outcome holds / fails / inconclusive with
its test, statistic and p-value).

- ``matches the authors' published accuracies``: at every point of a published curve
  (``published.yaml`` beside this module) that this run also trained, the seeds' mean within
  the file's tolerance of their value (a TOST per point: holds when every 90% interval lies
  inside the tolerance, fails when one lies outside);
- ``above paper B's lower bound``: at every point of an association curve the seeds' mean
  above 1/N + (1 − 1/N)(H·d_h + d)/T (one-sided t-tests; fails when one point is
  significantly below); the smallest margin over the previous bound H(d_h − 1) + 1 beside it;
- the forms of paper B's figures: linear in H, quadratic in d_h, piecewise linear in d with
  its knot at d_h (AoT curves), each by the lack-of-fit F-test against the per-x means, the
  line also by its slope's 95% interval. Accuracy cannot pass 1: a point whose seed mean
  reaches ``CEILING`` is **censored** (left out of the fit and named), and a curve left with
  no more points than its form has coefficients is inconclusive;
- ``AoT and MLP-Transformer alike per parameter``: the k-th smallest AoT and MLP-Transformer of
  a facet (MLP width 2·d·(H − 1): equal parameter counts for the paper's variant, within 4%
  for the authors'), compared seed by seed (a seed's two models share its task and sample):
  the relative change AoT / MLP − 1 per seed, its 90% interval and two one-sided tests at
  ± ``law_tests.MARGIN``. A pair is *alike* (interval inside the margin), *MLP ahead* or
  *AoT ahead* (interval entirely on one side of 0, not alike) or *inconclusive*; the pair at
  H = 1 (MLP width 0: the same model) is marked and not counted. The facet is alike when
  every other pair is, ahead when some pair is and none the other way, else inconclusive
  (``comparison``); the finding holds when alike and fails when one model is ahead.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from memcap import laws as law_tests
from memcap.aot.bounds import SATURATION as CEILING
from memcap.aot.summary import curve_form, facet_groups, seed_means

PUBLISHED_FILE = Path(__file__).with_name("published.yaml")
COLUMNS = [
    "law", "sweep", "curve", "criterion", "measured", "outcome", "holds",
    "test", "statistic", "p_value", "p_floor", "p_holm", "power", "seeds_needed", "power_at",
    "comparison", "caveat",
]  # fmt: skip
FORM_LAWS = {
    "linear": "linear in H",
    "quadratic": "quadratic in d_h",
    "hinge": "piecewise linear in d (knot at d_h)",
}
AHEAD = {"lower": "MLP ahead", "higher": "AoT ahead", "alike": "alike"}
ALIKE = "AoT and MLP-Transformer alike per parameter"


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
    table = pd.DataFrame([row for row in rows if row is not None], columns=COLUMNS)
    table["p_holm"] = law_tests.holm(table["p_value"])
    alike = table["law"] == ALIKE
    table.loc[alike, "caveat"] = [
        budget_caveat(summary, sweep, reference.get("budgets", {}))
        for sweep in table.loc[alike, "sweep"]
    ]
    return table.fillna({"caveat": "", "power_at": ""})


def budget_caveat(summary: pd.DataFrame, sweep: str, budgets: Mapping[str, Any]) -> str:
    """What a verdict owes to its training budget: this run's steps against the authors'
    (``published.yaml``'s ``budgets``) where this run trains fewer; else empty."""
    theirs = budgets.get(sweep)
    if not theirs or "steps_run" not in summary:
        return ""
    ours = summary.loc[summary["sweep"] == sweep, "steps_run"].max()
    if not ours < theirs["steps"]:
        return ""
    share = Fraction(int(ours), int(theirs["steps"]))
    return (
        f"trained {int(ours):,} steps, {share} of the authors' {theirs['steps']:,} "
        f"({theirs['recipe']}); {theirs['evidence']}: the verdict is this budget's, not the "
        "models' at theirs"
    )


def _curve(model: str, label: str) -> str:
    return f"{model}, {label}" if label else model


def _row(law: str, sweep: str, curve: str, criterion: str, measured: str, result) -> dict:
    return {
        "law": law,
        "sweep": sweep,
        "curve": curve,
        "criterion": criterion,
        "measured": measured,
        "holds": result.outcome == "holds",
        **result.row(),
        "comparison": "",
        "caveat": "",
    }


def _by_x(rows: pd.DataFrame, x: str) -> dict[float, np.ndarray]:
    """Seed accuracies (one per seed: the mean over repeated rows) at every x."""
    per_seed = rows.groupby([x, "seed"])["accuracy"].mean()
    return {float(v): group.to_numpy() for v, group in per_seed.groupby(level=0)}


def _published(summary: pd.DataFrame, curve: Mapping[str, Any], tolerance: float) -> dict | None:
    """Our seeds against the published points both have; None when none is shared."""
    mask = pd.Series(True, index=summary.index)
    for key, value in curve["setting"].items():
        mask &= summary[key] == value
    ours = _by_x(summary[mask], curve["x"])
    theirs = {float(x): float(acc) for x, acc in curve["points"].items()}
    shared = {x: ours[x] for x in sorted(theirs) if x in ours}
    if not shared:
        return None
    result = law_tests.decide_match(shared, theirs, tolerance)
    setting = ", ".join(
        f"{k} = {v}" for k, v in curve["setting"].items() if k not in ("model", "task")
    )
    gaps = {x: float(np.mean(v)) - theirs[x] for x, v in shared.items()}
    measured = "; ".join(
        f"{curve['x']} = {x:g}: {np.mean(v):.3f} vs {theirs[x]:.3f}" for x, v in shared.items()
    )
    measured += f"; largest |Δ| {max(abs(g) for g in gaps.values()):.3f}; {result.detail}"
    criterion = (
        f"seed mean within ±{tolerance} of theirs at every {curve['x']} both have "
        f"(TOST, {1 - 2 * law_tests.ALPHA:.0%} interval)"
    )
    return _row(
        "matches the authors' published accuracies",
        curve["sweep"],
        setting,
        criterion,
        measured,
        result,
    )


def _above_bound(sweep: str, model: str, label: str, rows: pd.DataFrame) -> dict | None:
    """Every point's seeds above paper B's lower bound (AoT curves only); the smallest margin
    over the previous bound beside it."""
    if model != "aot":
        return None
    x = rows["x_axis"].iloc[0]
    means = seed_means(rows, x).set_index(x)
    result = law_tests.decide_above(_by_x(rows, x), means["bound_ours"].to_dict())
    margin = means["accuracy"] - means["bound_ours"]
    previous = means["accuracy"] - means["bound_previous"]
    low, prev = margin.idxmin(), previous.idxmin()
    below = [v for v in means.index if previous[v] < 0]
    measured = (
        f"smallest margin {margin[low]:+.3f} at {x} = {low} "
        f"({means.loc[low, 'accuracy']:.3f} vs {means.loc[low, 'bound_ours']:.3f}); over the "
        f"previous bound H(d_h − 1) + 1 {previous[prev]:+.3f} at {x} = {prev}"
        + (f", below it at {x} = {', '.join(str(v) for v in below)}" if below else "")
        + f"; {result.detail}"
    )
    criterion = (
        "seed mean above 1/N + (1 − 1/N)(H·d_h + d)/T at every point (one-sided t-tests, "
        f"p < {law_tests.ALPHA} at each)"
    )
    return _row(
        "above paper B's lower bound", sweep, _curve(model, label), criterion, measured, result
    )


def _alike(sweep: str, label: str, aot: pd.DataFrame, curves: list) -> dict | None:
    """The AoT curve against the MLP-Transformer curve of the same facet, pair by pair."""
    mlp = [rows for model, other, rows in curves if model == "mlp" and other == label]
    if aot["model"].iloc[0] != "aot" or not mlp:
        return None
    pairs = paired_differences(aot, mlp[0])
    compared = [p for p in pairs if not p["same_model"] and p["seeds"] >= 2]
    verdicts = {AHEAD.get(p["verdict"], "inconclusive") for p in compared}
    if not compared:
        comparison = "inconclusive"
    elif verdicts == {"alike"}:
        comparison = "alike"
    elif verdicts - {"alike", "inconclusive"} in ({"MLP ahead"}, {"AoT ahead"}):
        comparison = (verdicts - {"alike", "inconclusive"}).pop()
    else:
        comparison = "inconclusive"
    outcome = {"alike": "holds", "inconclusive": "inconclusive"}.get(comparison, "fails")
    worst = max(compared, key=lambda p: p["p_value"], default=None)
    measured = "; ".join(_describe_pair(p) for p in pairs)
    seeds = sorted({p["seeds"] for p in pairs})
    power = seeds_needed = float("nan")
    if outcome == "inconclusive" and compared:  # every pair alike, at no difference
        power, seeds_needed = law_tests.joint(
            [p["equivalence"].power for p in compared], min(p["seeds"] for p in compared)
        )
    return {
        "law": ALIKE,
        "sweep": sweep,
        "curve": label or "all",
        "criterion": (
            f"per seed AoT / MLP − 1 at each matched parameter count: alike if its "
            f"{1 - 2 * law_tests.ALPHA:.0%} interval lies inside ±{law_tests.MARGIN:.0%} "
            "(TOST), one model ahead if it lies on one side of 0 (not alike), else "
            "inconclusive; the facet alike when every pair beyond H = 1 is"
        ),
        "measured": measured + f"; {'/'.join(str(n) for n in seeds)} seed(s)",
        "outcome": outcome,
        "holds": outcome == "holds",
        "test": law_tests.TESTS["tost"],
        "statistic": worst["statistic"] if worst else float("nan"),
        "p_value": worst["p_value"] if worst else float("nan"),
        "p_floor": 0.0,
        "power": power,
        "seeds_needed": seeds_needed,
        "power_at": "no difference (the two alike) at every pair" if np.isfinite(power) else "",
        "comparison": comparison,
    }


def _describe_pair(p: Mapping[str, Any]) -> str:
    head = (
        f"{p['params_aot']:.0f} / {p['params_mlp']:.0f} parameters: "
        f"{p['aot']:.3f} vs {p['mlp']:.3f}"
    )
    if p["same_model"]:
        return f"{head} (H = 1: MLP width 0, the same model; not compared)"
    if p["seeds"] < 2:
        return f"{head} (one seed: no interval)"
    return (
        f"{head}, AoT / MLP − 1 {p['change']:+.1%} [{p['low']:+.1%}, {p['high']:+.1%}], "
        f"TOST p = {p['p_value']:.3g} ({AHEAD.get(p['verdict'], 'inconclusive')})"
    )


def paired_differences(aot: pd.DataFrame, mlp: pd.DataFrame) -> list[dict[str, Any]]:
    """The k-th smallest AoT against the k-th smallest MLP-Transformer (by parameter count):
    seed means, whether they are the same model (MLP width 0), and over shared seeds the
    relative change AoT / MLP − 1 with its interval, TOST, verdict and the TOST itself
    (``equivalence``: its power at no difference)."""
    out = []
    aot_params = sorted(aot["params"].unique())
    mlp_params = sorted(mlp["params"].unique())
    for a_params, m_params in zip(aot_params, mlp_params, strict=False):
        a = aot[aot["params"] == a_params].groupby("seed")["accuracy"].mean()
        m_rows = mlp[mlp["params"] == m_params]
        m = m_rows.groupby("seed")["accuracy"].mean()
        shared = a.index.intersection(m.index)
        pair = {
            "params_aot": float(a_params),
            "params_mlp": float(m_params),
            "aot": float(a.mean()),
            "mlp": float(m.mean()),
            "seeds": len(shared),
            "same_model": bool((m_rows["width"] == 0).all()),
            "change": float("nan"),
            "low": float("nan"),
            "high": float("nan"),
            "statistic": float("nan"),
            "p_value": float("nan"),
            "verdict": "inconclusive",
            "equivalence": None,
        }
        if len(shared) >= 2 and not pair["same_model"]:
            verdict, result = law_tests.compare(m[shared].to_numpy(), a[shared].to_numpy())
            pair.update(
                change=result.change, low=result.low, high=result.high, equivalence=result,
                statistic=result.statistic, p_value=result.p_value, verdict=verdict,
            )  # fmt: skip
        out.append(pair)
    return out


def _form(sweep: str, model: str, label: str, rows: pd.DataFrame) -> dict | None:
    """The AoT curve's form (by its x axis) decided on its seeds below the ceiling."""
    x = rows["x_axis"].iloc[0]
    if model != "aot" or x not in ("H", "d_h", "d"):  # per parameter: no form claimed
        return None
    result = form_test(rows)
    means = seed_means(rows, x)
    criterion = (
        f"lack-of-fit F-test against the per-{x} seed means: p ≥ {law_tests.HOLD_P} holds, "
        f"p < {law_tests.FAIL_P} fails"
        + ("; slope's 95% interval above 0" if result.form == "linear" else "")
        + f"; seed means ≥ {CEILING} censored"
    )
    measured = (
        ", ".join(f"{a:.3f}" for a in means["accuracy"])
        + f" at {x} = {', '.join(str(v) for v in means[x])}; {result.detail}"
    )
    return _row(
        FORM_LAWS[curve_form(rows, x)[0]], sweep, _curve(model, label), criterion, measured, result
    )


def form_test(rows: pd.DataFrame) -> law_tests.LawTest:
    """The form law of one AoT curve on its seeds, seed means at ``CEILING`` censored."""
    x = rows["x_axis"].iloc[0]
    form, knot = curve_form(rows, x)
    seeds = rows.groupby([x, "seed"], as_index=False)["accuracy"].mean()
    seeds["censored"] = seeds.groupby(x)["accuracy"].transform("mean") >= CEILING
    return law_tests.decide(
        seeds, form, x=x, y="accuracy", knot=knot, censored="censored", grows=form == "linear"
    )
