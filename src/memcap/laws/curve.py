"""Scaling laws decided by hypothesis tests on seed-level data, for both papers.

A capacity (or accuracy) estimate is a random variable: the seeds of a setting are replicates,
and every test here uses their spread as its reference. Outcomes are ``holds``, ``fails``,
``inconclusive`` or ``untestable on this grid`` (too few values of x for the test, a property
of the grid rather than of the seeds), each with its test statistic and p-value; an
inconclusive test also carries its power and the seeds 80% power would need
(:mod:`memcap.law_power`).

- **A form** (``linear``, ``quadratic``, ``hinge``: piecewise linear with a known knot):
  the lack-of-fit F-test of the least-squares fit over every seed against the per-x means,
  the seeds' pure error as reference (F = [SS_lof / (k − p)] / [SS_pe / (N − k)] for k
  values, p coefficients, N points). p ≥ ``HOLD_P`` holds, p < ``FAIL_P`` fails, between is
  inconclusive. Where the seeds' spread grows with the mean (paper A's capacities), the fit
  and both sums of squares are weighted by 1 / mean² (``variance="proportional"``). A law
  that the quantity *grows* in that form also needs its growth term's 95% interval above
  zero (below: fails; containing zero: inconclusive).
- **Grows** (monotone trend): the Jonckheere–Terpstra statistic (pairs of seeds at a smaller
  and a larger x that increase, ties counted half), its one-sided p-value from a permutation
  test of the seeds across x (``scipy.stats.permutation_test``; at its floor 1/(B + 1) the
  p-value is printed "≤"). p < ``ALPHA`` holds; a decrease significant at ``ALPHA`` fails.
  **Grows up to** a reference x: also every step's paired relative change y(x) / y(x⁻) − 1 by
  a one-sided t-test; growth stops at the largest x whose step is significantly positive, and
  the law holds only when the trend holds and the step into the reference is significantly
  positive (intersection-union: p the larger of the two); a significant fall into the
  reference fails.
- **Saturates** beyond a reference x (gains stop): a one-sided non-superiority t-test of the
  paired relative change of every larger x against +``MARGIN``, the largest p over x: holds
  when every 95% upper bound lies below +MARGIN, fails when one change lies significantly
  above it (Bonferroni over the values).
- **Equivalence** (:func:`equivalence`, :func:`compare`): two one-sided t-tests (TOST) of the
  per-seed relative change within ± ``MARGIN``.

Censored points (a ceiling or a grid bounds them, not the law) are left out of every test and
named. :func:`decide` takes seed-level rows (a DataFrame of x, seed and y) for any caller.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from memcap import law_power
from memcap._law_decision import (
    ALPHA,
    COEFFICIENTS,
    FAIL_P,
    HOLD_P,
    MARGIN,
    PERMUTATIONS,
    TESTS,
    UNTESTABLE,
    LawTest,
    design,
    no_test,
    p_text,
    untestable,
    with_power,
)
from memcap._law_paired import (
    Equivalence,
    Step,
    compare,
    decide_above,
    decide_match,
    decide_saturates,
    equivalence,
    grows_to,
    steps,
)

__all__ = [
    "ALPHA", "COEFFICIENTS", "FAIL_P", "HOLD_P", "MARGIN", "PERMUTATIONS", "TESTS",
    "UNTESTABLE", "Equivalence", "LawTest", "Step", "compare", "decide", "decide_above",
    "decide_form", "decide_grows", "decide_match", "decide_saturates", "design",
    "equivalence", "grows_to", "p_text", "steps",
]  # fmt: skip


def _clean(x, y) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError("x and y must be 1-D arrays of the same length")
    keep = np.isfinite(x) & np.isfinite(y)
    return x[keep], y[keep]


def decide_form(
    x,
    y,
    form: str = "linear",
    knot: float = float("nan"),
    grows: bool = False,
    variance: str = "constant",
) -> LawTest:
    """Lack-of-fit F-test of ``form`` over seed-level points (x, y) against the per-x means;
    with ``grows``, also the growth term's 95% interval (slope; hinge: the slope before the
    knot; quadratic: the slope at the mean x). ``variance``: ``constant`` (least squares) or
    ``proportional`` (the seeds' standard deviation a fixed fraction of the mean: weighted
    least squares with weights 1 / mean², the per-x seed mean standing in for it)."""
    x, y = _clean(x, y)
    p = COEFFICIENTS[form]
    levels, inverse = np.unique(x, return_inverse=True)
    k, n = len(levels), len(x)
    if k <= p:
        return untestable(form, f"{k} values; the form has {p} coefficients")
    if n <= k:
        return no_test(form, "one seed per value (no pure error)")
    basis = design(x, form, knot)
    means = np.bincount(inverse, y) / np.bincount(inverse)
    weights = _weights(means, variance)[inverse]
    root = np.sqrt(weights)
    coef, *_ = np.linalg.lstsq(basis * root[:, None], y * root, rcond=None)
    sse = float(np.sum(weights * (y - basis @ coef) ** 2))
    ss_pe = float(np.sum(weights * (y - means[inverse]) ** 2))
    ss_lof = max(sse - ss_pe, 0.0)
    df_lof, df_pe = k - p, n - k
    if ss_pe == 0.0:
        statistic = 0.0 if ss_lof <= 1e-12 * max(sse, 1.0) else float("inf")
        p_value = 1.0 if statistic == 0.0 else 0.0
    else:
        statistic = (ss_lof / df_lof) / (ss_pe / df_pe)
        p_value = float(stats.f.sf(statistic, df_lof, df_pe))
    covariance = sse / (n - p) * np.linalg.pinv(basis.T @ (basis * weights[:, None]))
    outcome = "holds" if p_value >= HOLD_P else "fails" if p_value < FAIL_P else "inconclusive"
    detail = f"F({df_lof}, {df_pe}) = {statistic:.2f}, p = {p_value:.3g}"
    extra: dict[str, Any] = {"df": (df_lof, df_pe)}
    seeds = n / k
    candidates = []
    if outcome == "inconclusive":
        power, needed = law_power.lack_of_fit(statistic, df_lof, df_pe, k, seeds, FAIL_P)
        candidates.append((power, needed, f"the observed lack of fit, failing at p < {FAIL_P}"))
    if grows:
        gradient = _growth_gradient(form, x)
        slope = float(gradient @ coef)
        se = float(np.sqrt(gradient @ covariance @ gradient))
        half = stats.t.ppf(1 - ALPHA / 2, n - p) * se
        extra.update(slope=slope, slope_low=slope - half, slope_high=slope + half)
        detail += f"; slope {slope:.3g} [{slope - half:.3g}, {slope + half:.3g}] (95%)"
        if slope + half < 0:
            outcome = "fails"
        elif slope - half <= 0 and outcome != "fails":
            outcome = "inconclusive"
            power, needed = law_power.slope(slope / se if se else 0.0, seeds, k, p, ALPHA)
            candidates.append((power, needed, "the observed slope, its interval above 0"))
    result = LawTest(
        form,
        outcome,
        TESTS["form"],
        float(statistic),
        p_value,
        detail,
        form=form,
        knot=knot,
        coefficients=tuple(float(c) for c in coef),
        covariance=tuple(tuple(float(v) for v in row) for row in covariance),
        dof=n - p,
        extra=extra,
    )
    return with_power(result, candidates)


def _weights(means: np.ndarray, variance: str) -> np.ndarray:
    """Per-x weights of the fit: 1 (constant variance) or 1 / mean² (proportional), the means
    floored at 1% of the largest so that a value near 0 cannot take every weight."""
    if variance == "constant":
        return np.ones_like(means)
    if variance == "proportional":
        scale = np.maximum(np.abs(means), 0.01 * float(np.max(np.abs(means))) or 1.0)
        return 1.0 / scale**2
    raise ValueError(f"unknown variance model '{variance}'; use constant or proportional")


def _growth_gradient(form: str, x: np.ndarray) -> np.ndarray:
    """The linear functional of the coefficients that is the form's growth term."""
    if form == "quadratic":
        return np.array([0.0, 1.0, 2.0 * float(np.mean(x))])
    return np.array([0.0, 1.0] + [0.0] * (COEFFICIENTS[form] - 2))


def decide_grows(x, y, seed: int = 0, power: bool = True) -> LawTest:
    """Whether y increases with x: Jonckheere–Terpstra, permutation p-values both ways; where
    inconclusive (and ``power``), the trend's simulated power at the measured means and spread
    (``extra["trend"]``: that power as a function of the seeds)."""
    x, y = _clean(x, y)
    levels = np.unique(x)
    groups = [y[x == level] for level in levels]
    if len(levels) < 2:
        return untestable("grows", f"{len(levels)} value")
    if min(len(g) for g in groups) < 2:  # the permutation reference needs replicates
        return no_test("grows", "fewer than two seeds at some value")
    result = stats.permutation_test(
        groups,
        law_power.jonckheere,
        permutation_type="independent",
        vectorized=True,
        n_resamples=PERMUTATIONS,
        alternative="greater",
        rng=np.random.default_rng(seed),
    )
    statistic, greater = float(result.statistic), float(result.pvalue)
    null = result.null_distribution
    less = float((np.sum(null <= statistic) + 1) / (len(null) + 1))
    arrangements = math.factorial(len(y)) // math.prod(math.factorial(len(g)) for g in groups)
    floor = 1 / (PERMUTATIONS + 1) if arrangements > PERMUTATIONS else 0.0
    if floor == 0.0:  # every arrangement enumerated: the exact p-value of a decrease
        less = float(np.mean(null <= statistic))
    pairs = sum(len(a) * len(b) for i, a in enumerate(groups) for b in groups[i + 1 :])
    outcome = "holds" if greater < ALPHA else "fails" if less < ALPHA else "inconclusive"
    detail = (
        f"J = {statistic:g} of {pairs} pairs increasing ({statistic / pairs:.0%}), "
        f"{p_text(greater, floor)} (decrease: {p_text(less, floor)})"
    )
    decided = LawTest("grows", outcome, TESTS["grows"], statistic, greater, detail, p_floor=floor)
    if not power or outcome != "inconclusive" or min(len(g) for g in groups) < 2:
        return decided
    means, sds = [g.mean() for g in groups], [g.std(ddof=1) for g in groups]

    def trend(n: int) -> float:
        return law_power.trend(means, sds, n, ALPHA)

    seeds = round(len(y) / len(groups))
    needed = law_power.smallest_seeds(trend, limit=law_power.TREND_LIMIT)
    at = "the measured means and spread (simulated)"
    return with_power(replace(decided, extra={"trend": trend}), [(trend(seeds), needed, at)])


def _paired(rows: pd.DataFrame, x: str, y: str, seed: str) -> pd.DataFrame:
    """Seeds × x (the seeds present at every x), the mean over repeated rows."""
    table = rows.pivot_table(index=seed, columns=x, values=y, aggfunc="mean").dropna()
    return table.set_axis(table.columns.astype(float), axis=1)


def decide(
    rows,
    law: str,
    *,
    x: str = "value",
    y: str = "capacity",
    seed: str = "seed",
    knot: float = float("nan"),
    reference: float | None = None,
    censored: str | None = None,
    grows: bool = True,
    variance: str = "constant",
    name: str | None = None,
) -> LawTest:
    """Decide ``law`` on seed-level ``rows`` (a DataFrame with columns ``x``, ``seed``, ``y``).

    ``law``: ``linear``, ``quadratic``, ``hinge`` (with ``knot``), ``grows`` (with a
    ``reference``: grows up to it, :func:`grows_to`) or ``saturates`` (every x above
    ``reference`` against it, seeds paired). Every x where a row's ``censored`` column is
    true is left out (named in the detail: a censored seed's value is a lower bound, so that x
    has no mean); ``grows`` asks forms for a rising growth term; ``variance`` is the forms'
    variance model (:func:`decide_form`); ``name`` names x in the detail (default ``x``).
    """
    name = name or x
    left_out = ""
    if censored is not None and censored in rows:
        flagged = sorted(set(rows.loc[rows[censored].astype(bool), x].astype(float)))
        if flagged:
            left_out = f"; censored, left out: {name} = " + ", ".join(f"{v:g}" for v in flagged)
        rows = rows[~rows[x].astype(float).isin(flagged)]
    xs, ys = rows[x].to_numpy(float), rows[y].to_numpy(float)
    if law in COEFFICIENTS:
        result = decide_form(xs, ys, law, knot, grows=grows, variance=variance)
    elif law == "grows":
        result = decide_grows(xs, ys)
        if reference is not None and result.outcome != UNTESTABLE:
            result = grows_to(result, _paired(rows, x, y, seed), float(reference), name)
    elif law == "saturates":
        if reference is None:
            raise ValueError("the saturates law needs its reference x")
        table = _paired(rows, x, y, seed)
        if float(reference) not in table.columns or len(table) < 2:
            result = no_test("saturates", f"fewer than two seeds at {name} = {reference:g}")
        else:
            others = {c: table[c].to_numpy() for c in table.columns if c > reference}
            result = decide_saturates(table[float(reference)].to_numpy(), others)
    else:
        raise ValueError(f"unknown law '{law}'; use linear, quadratic, hinge, grows or saturates")
    return replace(result, detail=result.detail + left_out) if left_out else result
