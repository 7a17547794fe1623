"""Scaling laws decided by hypothesis tests on seed-level data, for both papers.

A capacity (or accuracy) estimate is a random variable: the seeds of a setting are replicates,
and every test here uses their spread as its reference. Outcomes are ``holds``, ``fails`` or
``inconclusive``, each with its test statistic and p-value.

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
  test of the seeds across x (``scipy.stats.permutation_test``). p < ``ALPHA`` holds; a
  decrease significant at ``ALPHA`` fails; else inconclusive.
- **Flat** (equivalence within ± ``MARGIN``): two one-sided t-tests (TOST) of the per-seed
  relative change against a reference x, paired by seed. The (1 − 2·ALPHA) interval inside
  ± MARGIN holds, entirely outside it fails, else inconclusive. :func:`compare` reads the
  same interval as a comparison of two models (alike / lower / higher / inconclusive).

Censored points (a ceiling or a grid bounds them, not the law) are left out of every test and
named. SciPy supplies the distributions and the permutation test; the fits are NumPy's least
squares. :func:`decide` takes seed-level rows (a DataFrame of x, seed and y) for any caller.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

HOLD_P = 0.05  # lack-of-fit: p at or above this holds
FAIL_P = 0.01  # lack-of-fit: p below this fails
ALPHA = 0.05  # one-sided level of the trend test and of each TOST side; 95% slope intervals
MARGIN = 0.10  # equivalence margin, relative to the reference
PERMUTATIONS = 9999
COEFFICIENTS = {"linear": 2, "quadratic": 3, "hinge": 3}
TESTS = {"form": "lack-of-fit F", "grows": "Jonckheere–Terpstra", "flat": "TOST"}


@dataclass(frozen=True)
class LawTest:
    """One law's decision: outcome, test, statistic, p-value, what was measured, and the fit
    (coefficients and covariance, for a band) where the law is a form."""

    law: str  # linear, quadratic, hinge, grows or flat
    outcome: str  # holds, fails or inconclusive
    test: str
    statistic: float
    p_value: float
    detail: str
    form: str | None = None
    knot: float = float("nan")
    coefficients: tuple[float, ...] = ()
    covariance: tuple[tuple[float, ...], ...] = ()
    dof: int = 0  # residual degrees of freedom of the fit (t quantile of the band)
    extra: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        """The columns a laws table takes from the decision."""
        return {k: getattr(self, k) for k in ("outcome", "test", "statistic", "p_value")}

    def band(self, x, level: float = 0.95) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The fitted form at ``x`` and its pointwise ``level`` confidence band."""
        if not self.coefficients:
            raise ValueError(f"a {self.law} decision has no fitted form")
        basis = design(np.asarray(x, dtype=float), self.form or "linear", self.knot)
        mean = basis @ np.asarray(self.coefficients)
        se = np.sqrt(np.einsum("ij,jk,ik->i", basis, np.asarray(self.covariance), basis))
        half = stats.t.ppf(0.5 + level / 2, max(self.dof, 1)) * se
        return mean, mean - half, mean + half


def design(x: np.ndarray, form: str, knot: float = float("nan")) -> np.ndarray:
    """The design matrix of ``form`` at ``x``: intercept first."""
    x = np.asarray(x, dtype=float)
    if form == "linear":
        return np.stack([np.ones_like(x), x], axis=-1)
    if form == "quadratic":
        return np.stack([np.ones_like(x), x, x**2], axis=-1)
    if form == "hinge":
        if np.isnan(knot):
            raise ValueError("the hinge form needs its knot")
        return np.stack([np.ones_like(x), x, np.maximum(0.0, x - knot)], axis=-1)
    raise ValueError(f"unknown form '{form}'; use one of {sorted(COEFFICIENTS)}")


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
    if k <= p or n <= k:
        reason = f"{k} values" if k <= p else "one seed per value (no pure error)"
        return _no_test(form, f"not testable: {reason}; the form has {p} coefficients")
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
    if grows:
        gradient = _growth_gradient(form, x)
        slope = float(gradient @ coef)
        half = stats.t.ppf(1 - ALPHA / 2, n - p) * float(np.sqrt(gradient @ covariance @ gradient))
        extra.update(slope=slope, slope_low=slope - half, slope_high=slope + half)
        detail += f"; slope {slope:.3g} [{slope - half:.3g}, {slope + half:.3g}] (95%)"
        if slope + half < 0:
            outcome = "fails"
        elif slope - half <= 0 and outcome == "holds":
            outcome = "inconclusive"
    return LawTest(
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


def _no_test(law: str, detail: str) -> LawTest:
    return LawTest(law, "inconclusive", "none", float("nan"), float("nan"), detail)


def _jonckheere(*groups: np.ndarray, axis: int = -1) -> np.ndarray:
    """Jonckheere–Terpstra statistic over groups in increasing x (vectorised over ``axis``)."""
    groups = [np.moveaxis(np.asarray(g), axis, -1) for g in groups]
    total = 0.0
    for i, low in enumerate(groups):
        for high in groups[i + 1 :]:
            diff = high[..., None, :] - low[..., :, None]
            total = total + (diff > 0).sum((-1, -2)) + 0.5 * (diff == 0).sum((-1, -2))
    return np.asarray(total, dtype=float)


def decide_grows(x, y, seed: int = 0) -> LawTest:
    """Whether y increases with x: Jonckheere–Terpstra, permutation p-values both ways."""
    x, y = _clean(x, y)
    levels = np.unique(x)
    groups = [y[x == level] for level in levels]
    if len(levels) < 2 or len(x) < 3:
        return _no_test("grows", f"not testable: {len(levels)} values, {len(x)} points")
    result = stats.permutation_test(
        groups,
        _jonckheere,
        permutation_type="independent",
        vectorized=True,
        n_resamples=PERMUTATIONS,
        alternative="greater",
        rng=np.random.default_rng(seed),
    )
    statistic = float(result.statistic)
    greater = float(result.pvalue)
    less = float(np.mean(result.null_distribution <= statistic) * PERMUTATIONS + 1) / (
        PERMUTATIONS + 1
    )
    pairs = sum(len(a) * len(b) for i, a in enumerate(groups) for b in groups[i + 1 :])
    outcome = "holds" if greater < ALPHA else "fails" if less < ALPHA else "inconclusive"
    detail = (
        f"J = {statistic:g} of {pairs} pairs increasing ({statistic / pairs:.0%}), "
        f"p = {greater:.3g} (decrease: p = {less:.3g})"
    )
    return LawTest("grows", outcome, TESTS["grows"], statistic, greater, detail)


@dataclass(frozen=True)
class Equivalence:
    """Per-seed relative change of ``other`` against ``reference`` and its TOST."""

    change: float  # mean over seeds of other / reference − 1
    low: float  # (1 − 2·ALPHA) interval
    high: float
    statistic: float  # the smaller of the two one-sided t statistics
    p_value: float  # TOST: the larger of the two one-sided p-values
    seeds: int
    margin: float = MARGIN

    @property
    def equivalent(self) -> bool:
        return self.p_value < ALPHA

    @property
    def outside(self) -> bool:
        """The interval lies entirely outside ± margin."""
        return self.high < -self.margin or self.low > self.margin

    def describe(self) -> str:
        interval = f"[{self.low:+.1%}, {self.high:+.1%}] ({1 - 2 * ALPHA:.0%}, {self.seeds} seeds)"
        return f"{self.change:+.1%} {interval}, TOST p = {self.p_value:.3g}"


def equivalence(reference, other, margin: float = MARGIN) -> Equivalence:
    """TOST of the paired relative change other_s / reference_s − 1 within ± ``margin``."""
    reference, other = np.asarray(reference, dtype=float), np.asarray(other, dtype=float)
    if reference.shape != other.shape or len(reference) < 2:
        raise ValueError("equivalence needs at least two paired seeds")
    if np.any(reference <= 0):
        raise ValueError("a relative change needs a positive reference")
    change = other / reference - 1.0
    mean, n = float(change.mean()), len(change)
    se = float(change.std(ddof=1) / np.sqrt(n))
    half = stats.t.ppf(1 - ALPHA, n - 1) * se
    if se == 0.0:
        inside = abs(mean) < margin
        t_low = t_high = float("inf") if inside else float("-inf")
        p = 0.0 if inside else 1.0
    else:
        t_low, t_high = (mean + margin) / se, (margin - mean) / se
        p = float(max(stats.t.sf(t_low, n - 1), stats.t.sf(t_high, n - 1)))
    return Equivalence(mean, mean - half, mean + half, float(min(t_low, t_high)), p, n, margin)


def decide_flat(reference, others: dict[float, Any], margin: float = MARGIN) -> LawTest:
    """Every x in ``others`` (paired seed arrays) within ± ``margin`` of ``reference``: the
    intersection-union TOST (the largest p); fails when one interval lies outside."""
    results = {x: equivalence(reference, values, margin) for x, values in sorted(others.items())}
    if not results:
        return _no_test("flat", "not testable: no value beyond the reference")
    worst = max(results.values(), key=lambda r: r.p_value)
    outcome = _outcome(
        all(r.equivalent for r in results.values()), any(r.outside for r in results.values())
    )
    detail = "; ".join(f"{x:g}: {r.describe()}" for x, r in results.items())
    return LawTest(
        "flat", outcome, TESTS["flat"], worst.statistic, worst.p_value, detail, extra=results
    )


def compare(reference, other, margin: float = MARGIN) -> tuple[str, Equivalence]:
    """Two models compared seed by seed: ``alike`` (interval inside ± margin), ``lower`` or
    ``higher`` (other against reference: interval entirely on one side of 0, not alike), else
    ``inconclusive``."""
    result = equivalence(reference, other, margin)
    if result.equivalent:
        return "alike", result
    if result.high < 0:
        return "lower", result
    if result.low > 0:
        return "higher", result
    return "inconclusive", result


def _one_sample(values, target: float, alternative: str) -> tuple[float, float]:
    """One-sided t-test of the mean of ``values`` against ``target`` (``greater``: the mean
    above it); seeds that agree exactly decide by their common value."""
    values = np.asarray(values, dtype=float)
    mean, n = float(values.mean()), len(values)
    sign = 1.0 if alternative == "greater" else -1.0
    se = float(values.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
    if n < 2 or se == 0.0:
        beyond = sign * (mean - target) > 0
        return (float("inf") if beyond else float("-inf")), (0.0 if beyond else 1.0)
    t = sign * (mean - target) / se
    return t, float(stats.t.sf(t, n - 1))


def _outcome(holds: bool, fails: bool) -> str:
    return "fails" if fails else "holds" if holds else "inconclusive"


def decide_above(groups: dict[float, Any], bounds: dict[float, float]) -> LawTest:
    """Every x's mean above its bound: one-sided t-tests, p the largest over x (an
    intersection-union test: holds when every x is significantly above at ``ALPHA``); fails
    when one x is significantly below."""
    above = {x: _one_sample(v, bounds[x], "greater") for x, v in sorted(groups.items())}
    below = [_one_sample(v, bounds[x], "less")[1] for x, v in groups.items()]
    worst = max(above, key=lambda x: above[x][1])
    outcome = _outcome(all(p < ALPHA for _, p in above.values()), min(below) < ALPHA)
    detail = f"least margin at {worst:g}: t = {above[worst][0]:.3g}, p = {above[worst][1]:.3g}"
    return LawTest("above", outcome, "one-sided t", above[worst][0], above[worst][1], detail)


def decide_match(
    groups: dict[float, Any], targets: dict[float, float], tolerance: float
) -> LawTest:
    """Every x's mean within ± ``tolerance`` (absolute) of its target: a TOST per x, p the
    largest over x; fails when one x's (1 − 2·ALPHA) interval lies outside the tolerance."""
    results = {}
    for x, values in sorted(groups.items()):
        low, high = targets[x] - tolerance, targets[x] + tolerance
        sides = (_one_sample(values, low, "greater"), _one_sample(values, high, "less"))
        outside = min(_one_sample(values, high, "greater")[1], _one_sample(values, low, "less")[1])
        results[x] = (min(t for t, _ in sides), max(p for _, p in sides), outside < ALPHA)
    worst = max(results, key=lambda x: results[x][1])
    holds = all(r[1] < ALPHA for r in results.values())
    outcome = _outcome(holds, any(r[2] for r in results.values()))
    t, p, _ = results[worst]
    detail = f"TOST at ±{tolerance:g}, least conclusive at {worst:g}: p = {p:.3g}"
    return LawTest("match", outcome, TESTS["flat"], t, p, detail)


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
) -> LawTest:
    """Decide ``law`` on seed-level ``rows`` (a DataFrame with columns ``x``, ``seed``, ``y``).

    ``law``: ``linear``, ``quadratic``, ``hinge`` (with ``knot``), ``grows`` or ``flat``
    (every x above ``reference`` against it, seeds paired). Every x where a row's
    ``censored`` column is true is left out (named in the detail: a censored seed's value is a
    lower bound, so that x has no mean); ``grows`` asks forms for a rising growth term;
    ``variance`` is the forms' variance model (:func:`decide_form`).
    """
    left_out = ""
    if censored is not None and censored in rows:
        flagged = sorted(set(rows.loc[rows[censored].astype(bool), x].astype(float)))
        if flagged:
            left_out = f"; censored, left out: {x} = " + ", ".join(f"{v:g}" for v in flagged)
        rows = rows[~rows[x].astype(float).isin(flagged)]
    xs, ys = rows[x].to_numpy(float), rows[y].to_numpy(float)
    if law in COEFFICIENTS:
        result = decide_form(xs, ys, law, knot, grows=grows, variance=variance)
    elif law == "grows":
        result = decide_grows(xs, ys)
    elif law == "flat":
        if reference is None:
            raise ValueError("the flat law needs its reference x")
        table = rows.pivot_table(index=seed, columns=x, values=y, aggfunc="mean").dropna()
        if reference not in table.columns or len(table) < 2:
            return _no_test("flat", f"not testable: fewer than two seeds at {x} = {reference}")
        others = {float(c): table[c].to_numpy() for c in table.columns if c > reference}
        result = decide_flat(table[reference].to_numpy(), others)
    else:
        raise ValueError(f"unknown law '{law}'; use linear, quadratic, hinge, grows or flat")
    if left_out:
        result = LawTest(**{**result.__dict__, "detail": result.detail + left_out})
    return result
