"""The law tests where some seeds' values are lower bounds: a normal model with censored points.

A seed whose capacity no larger T bracketed is known only from below: its value is
right-censored. Each observation is an interval [low, high]: exact (low = high),
right-censored (high = ∞) or interval-censored (a paired relative change whose reference is a
lower bound lies in [−1, r]). The tests maximise the normal likelihood of the linear model
y ~ N(Xβ, σ²s²) over (β, σ), each censored point contributing the probability of its
interval (the Tobit likelihood, maximised by ``scipy.optimize.minimize``), and turn the
likelihood ratio LR of two nested models into the statistic it equals when nothing is
censored:

- lack of fit (k values, p coefficients, N exact points): F = (exp(LR / N) − 1)·(N − k) /
  (k − p) on (k − p, N − k) degrees of freedom;
- a mean against a target (n exact seeds): t = sign(μ̂ − target)·√((n − 1)(exp(LR / n) − 1))
  on n − 1 degrees of freedom.

A censored point enters the likelihood but not the count of points: with a quarter of five
seeds censored, counting every point the step's t rejected a true null in 8% of 300 simulated
runs at 5%, counting the exact ones in 3.7% of 1,500; docs/laws.md's simulated table gives the
size of each censored test. With no censored point both are exactly the F- and t-tests of
:mod:`memcap.laws.forms` and :mod:`memcap.laws.paired`, which the callers run instead. The
trend test's censored form is Gehan's: a pair counts as an increase or a decrease only where
the smaller value is exact (:func:`gehan_jonckheere`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats
from scipy.special import log_ndtr

FLOOR = 1e-9  # the smallest σ (relative to the data's scale) the likelihood is maximised over


@dataclass(frozen=True)
class Fit:
    """A maximised censored likelihood: coefficients, σ, log-likelihood, their covariance."""

    coef: np.ndarray
    sigma: float
    loglik: float
    covariance: np.ndarray  # of coef at σ̂, scaled by N / (N − p) (the unbiased σ² uncensored)


def intervals(values, lower) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) of values of which those flagged ``lower`` are lower bounds."""
    values = np.asarray(values, dtype=float)
    high = np.where(np.asarray(lower, dtype=bool), np.inf, values)
    return values, high


def change_intervals(reference, other, reference_lower, other_lower):
    """(low, high) of each seed's relative change other / reference − 1, either value possibly
    a lower bound: a censored ``other`` gives [r, ∞), a censored reference [−1, r]; a seed
    with both censored says nothing about the change and is left out (``keep`` False)."""
    reference, other = np.asarray(reference, dtype=float), np.asarray(other, dtype=float)
    reference_lower = np.asarray(reference_lower, dtype=bool)
    other_lower = np.asarray(other_lower, dtype=bool)
    change = other / reference - 1.0
    low = np.where(reference_lower, -1.0, change)
    high = np.where(other_lower, np.inf, change)
    keep = ~(reference_lower & other_lower)
    return low[keep], high[keep], keep


def _log_probability(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """log(Φ(b) − Φ(a)) for a < b, accurate in both tails."""
    upper = a > 0  # both in the upper tail: Φ(−a) − Φ(−b)
    hi = np.where(upper, log_ndtr(-a), log_ndtr(b))
    lo = np.where(upper, log_ndtr(-b), log_ndtr(a))
    return hi + np.log1p(-np.exp(np.minimum(lo - hi, 0.0)))


def loglik(mean, sigma: float, low, high, scale) -> float:
    """Normal log-likelihood of interval observations [low, high] (equal: exact) at ``mean``
    with standard deviation σ·scale."""
    s = sigma * np.asarray(scale, dtype=float)
    exact = low == high
    with np.errstate(invalid="ignore", divide="ignore"):
        a, b = (low - mean) / s, (high - mean) / s
        point = stats.norm.logpdf(np.where(exact, a, 0.0)) - np.log(s)
        spread = _log_probability(np.where(exact, -1.0, a), np.where(exact, 1.0, b))
    return float(np.sum(np.where(exact, point, spread)))


def fit(basis, low, high, scale=None, offset=None) -> Fit:
    """Maximum-likelihood (β, σ) of y ~ N(offset + basis·β, σ²·scale²) on intervals."""
    low, high = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    basis = np.asarray(basis, dtype=float).reshape(len(low), -1)
    scale = np.ones_like(low) if scale is None else np.asarray(scale, dtype=float)
    offset = np.zeros_like(low) if offset is None else np.asarray(offset, dtype=float)
    start_y = np.where(np.isfinite(high), np.where(np.isfinite(low), (low + high) / 2, high), low)
    root = 1.0 / scale
    p = basis.shape[1]
    coef0 = np.linalg.lstsq(basis * root[:, None], (start_y - offset) * root, rcond=None)[0]
    resid = (start_y - offset - basis @ coef0) * root
    unit = float(np.max(np.abs(start_y * root))) or 1.0
    sigma0 = max(float(np.sqrt(np.mean(resid**2))), 1e-3 * unit)
    floor = FLOOR * unit

    def negative(theta: np.ndarray) -> float:
        sigma = floor + np.exp(theta[p])
        return -loglik(offset + basis @ theta[:p], sigma, low, high, scale)

    theta0 = np.append(coef0, np.log(sigma0))
    best = optimize.minimize(negative, theta0, method="BFGS", options={"gtol": 1e-9})
    coef, sigma = best.x[:p], floor + float(np.exp(best.x[p]))
    covariance = np.zeros((p, p))
    if p:
        hessian = _hessian(lambda c: -loglik(offset + basis @ c, sigma, low, high, scale), coef)
        covariance = np.linalg.pinv(hessian) * len(low) / max(len(low) - p, 1)
    return Fit(coef, sigma, -float(best.fun), covariance)


def _hessian(function: Callable[[np.ndarray], float], at: np.ndarray) -> np.ndarray:
    """Central finite-difference Hessian of ``function`` at ``at``."""
    steps = 1e-4 * np.maximum(np.abs(at), 1.0)
    size = len(at)
    out = np.empty((size, size))
    for i in range(size):
        for j in range(i, size):
            ei, ej = np.eye(size)[i] * steps[i], np.eye(size)[j] * steps[j]
            value = (function(at + ei + ej) - function(at + ei - ej) - function(at - ei + ej)
                     + function(at - ei - ej)) / (4 * steps[i] * steps[j])  # fmt: skip
            out[i, j] = out[j, i] = value
    return out


def level_means(inverse: np.ndarray, levels: int, low, high, scale=None) -> Fit:
    """The censored fit of one free mean per level (the pure-error model)."""
    return fit(np.eye(levels)[inverse], low, high, scale)


def ratio_f(full: Fit, reduced: Fit, points: int, df_num: int, df_den: int) -> float:
    """The F statistic the likelihood ratio of ``reduced`` within ``full`` equals uncensored."""
    ratio = max(2.0 * (full.loglik - reduced.loglik), 0.0)
    return float(np.expm1(ratio / points) * df_den / df_num)


def one_sample(low, high, target: float, alternative: str) -> tuple[float, float, float, float]:
    """One-sided test of the mean of interval observations against ``target`` (``greater``:
    above it): (t, p, μ̂, sd), t from the likelihood ratio against the mean fixed at
    ``target`` with n the exact observations, p from t with n − 1 degrees of freedom (1 where
    fewer than two are exact), sd = σ̂·√(n / (n − 1))."""
    t, above, below, mean, sd = both_sides(low, high, target)
    if alternative == "greater":
        return t, above, mean, sd
    return -t, below, mean, sd


def both_sides(low, high, target: float) -> tuple[float, float, float, float, float]:
    """:func:`one_sample` both ways from one pair of fits: (t above ``target``, p of
    ``greater``, p of ``less``, μ̂, sd)."""
    low, high = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    n, exact = len(low), int(np.sum(low == high))
    if exact < 2:
        return float("nan"), 1.0, 1.0, float("nan"), float("nan")
    free = fit(np.ones((n, 1)), low, high)
    fixed = fit(np.zeros((n, 0)), low, high, offset=np.full(n, float(target)))
    mean = float(free.coef[0])
    ratio = max(2.0 * (free.loglik - fixed.loglik), 0.0)
    t = np.sign(mean - target) * float(np.sqrt((exact - 1) * np.expm1(ratio / exact)))
    sd = free.sigma * float(np.sqrt(exact / (exact - 1)))
    return t, float(stats.t.sf(t, exact - 1)), float(stats.t.cdf(t, exact - 1)), mean, sd


def gehan_jonckheere(values, lower) -> Callable[..., np.ndarray]:
    """The Jonckheere–Terpstra statistic with Gehan's scores, as a function of index groups
    into ``values`` (vectorised over ``axis``, for ``scipy.stats.permutation_test``): a pair
    of a smaller and a larger x's seeds counts 1 where the larger x's value is surely larger,
    0 where surely smaller, ½ otherwise; "surely" needs the smaller value exact (a lower
    bound may hide any larger value). Uncensored, it is J with ties half."""
    values, lower = np.asarray(values, dtype=float), np.asarray(lower, dtype=bool)

    def statistic(*groups: np.ndarray, axis: int = -1) -> np.ndarray:
        index = [np.moveaxis(np.asarray(g), axis, -1).astype(int) for g in groups]
        total = 0.0
        for i, small in enumerate(index):
            a, a_lower = values[small][..., :, None], lower[small][..., :, None]
            for large in index[i + 1 :]:
                b, b_lower = values[large][..., None, :], lower[large][..., None, :]
                up = (b > a) & ~a_lower
                down = (b < a) & ~b_lower
                total = total + (up + 0.5 * ~(up | down)).sum((-2, -1))
        return np.asarray(total, dtype=float)

    return statistic
