"""A law's form decided on seed-level data: the lack-of-fit F-test against the seeds' pure error.

The forms: ``linear``, ``quadratic``, ``hinge`` (piecewise linear with a known knot). The
least-squares fit over every seed is tested against the per-x means, F = [SS_lof / (k − p)] /
[SS_pe / (N − k)] for k values, p coefficients, N points; p ≥ ``HOLD_P`` holds, p < ``FAIL_P``
fails, between is inconclusive. Where the seeds' spread grows with the mean the fit and both
sums of squares are weighted by 1 / mean² (``variance="proportional"``). A form that must
*grow* also needs its growth term's 95% interval above zero. A form that holds carries its
power against a stated alternative: a quadratic bend of ``CURVATURE`` (20%) of the mean over
the swept range, detected at p < ``HOLD_P`` (:func:`memcap.laws.power.curvature`), and the
seeds per value 80% power would need.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
from scipy import stats

from memcap.laws import censored
from memcap.laws import power as law_power
from memcap.laws.common import (
    ALPHA,
    COEFFICIENTS,
    FAIL_P,
    HOLD_P,
    TESTS,
    LawTest,
    design,
    no_test,
    points,
    untestable,
    with_power,
)

CURVATURE = 0.20  # the bend a "holds" carries its power against: 20% of the mean over the range


def decide_form(
    x,
    y,
    form: str = "linear",
    knot: float = float("nan"),
    grows: bool = False,
    variance: str = "constant",
    lower=None,
) -> LawTest:
    """Lack-of-fit F-test of ``form`` over seed-level points (x, y) against the per-x means;
    with ``grows``, also the growth term's 95% interval (slope; hinge: the slope before the
    knot; quadratic: the slope at the mean x). ``variance``: ``constant`` (least squares) or
    ``proportional`` (the seeds' standard deviation a fixed fraction of the mean: weighted
    least squares with weights 1 / mean², the per-x seed mean standing in for it). ``lower``
    flags the points that are lower bounds: where any is, the fit and the F are the censored
    likelihood's (:mod:`memcap.laws.censored`)."""
    flags = np.zeros(np.shape(x), bool) if lower is None else np.asarray(lower, dtype=bool)
    keep = np.isfinite(np.asarray(x, dtype=float)) & np.isfinite(np.asarray(y, dtype=float))
    x, y = points(x, y)
    flags = flags[keep]
    p = COEFFICIENTS[form]
    levels, inverse = np.unique(x, return_inverse=True)
    k, n = len(levels), len(x)
    if k <= p:
        return untestable(form, f"{k} values; the form has {p} coefficients")
    if n <= k:
        return no_test(form, "one seed per value (no pure error)")
    basis = design(x, form, knot)
    df_lof, df_pe = k - p, n - k
    if flags.any():
        df_pe = int(np.sum(~flags)) - k  # a censored point counts in the likelihood, not the df
        if df_pe < 1:
            return no_test(form, "too few exact seeds beside the censored ones (no pure error)")
        coef, covariance, statistic, means, pure = _censored(basis, y, flags, inverse, variance)
    else:
        coef, covariance, statistic, means, pure = _least_squares(basis, y, inverse, variance)
    if not np.isfinite(statistic) or statistic == 0.0:
        p_value = 0.0 if statistic == float("inf") else 1.0
    else:
        p_value = float(stats.f.sf(statistic, df_lof, df_pe))
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
    if outcome != "holds" or df_lof < 1 or pure == 0.0:
        return with_power(result, candidates)
    level_basis = design(levels, form, knot)
    level_weights = _weights(means, variance)
    power, needed = law_power.curvature(
        level_basis, levels, means, np.bincount(inverse).astype(float), level_weights,
        pure, CURVATURE, HOLD_P,
    )  # fmt: skip
    at = f"a {CURVATURE:.0%} bend over the swept range, detected at p < {HOLD_P}"
    return replace(result, power=power, seeds_needed=needed, power_at=at)


def _least_squares(basis, y, inverse, variance):
    """Weighted least squares: coefficients, their covariance, the lack-of-fit F, the per-x
    means and the pure-error variance (an F of 0 or ∞ where the seeds agree exactly)."""
    means = np.bincount(inverse, y) / np.bincount(inverse)
    weights = _weights(means, variance)[inverse]
    root = np.sqrt(weights)
    coef, *_ = np.linalg.lstsq(basis * root[:, None], y * root, rcond=None)
    sse = float(np.sum(weights * (y - basis @ coef) ** 2))
    ss_pe = float(np.sum(weights * (y - means[inverse]) ** 2))
    ss_lof = max(sse - ss_pe, 0.0)
    n, k, p = len(y), len(means), basis.shape[1]
    if ss_pe == 0.0:
        statistic = 0.0 if ss_lof <= 1e-12 * max(sse, 1.0) else float("inf")
    else:
        statistic = (ss_lof / (k - p)) / (ss_pe / (n - k))
    covariance = sse / (n - p) * np.linalg.pinv(basis.T @ (basis * weights[:, None]))
    return coef, covariance, statistic, means, ss_pe / (n - k)


def _censored(basis, y, lower, inverse, variance):
    """The same from the censored likelihood (:mod:`memcap.laws.censored`), the F counting the
    exact points only; the per-x means are the pure-error model's (its proportional weights
    refitted once from them)."""
    low, high = censored.intervals(y, lower)
    k, p = int(inverse.max()) + 1, basis.shape[1]
    means = censored.level_means(inverse, k, low, high).coef
    scale = 1.0 / np.sqrt(_weights(means, variance))[inverse]
    pure_fit = censored.level_means(inverse, k, low, high, scale)
    means = pure_fit.coef
    scale = 1.0 / np.sqrt(_weights(means, variance))[inverse]
    pure_fit = censored.level_means(inverse, k, low, high, scale)
    form_fit = censored.fit(basis, low, high, scale)
    exact = int(np.sum(~lower))
    statistic = censored.ratio_f(pure_fit, form_fit, exact, k - p, exact - k)
    pure = pure_fit.sigma**2 * exact / (exact - k)
    return form_fit.coef, form_fit.covariance, statistic, pure_fit.coef, pure


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
