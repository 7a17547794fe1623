"""Power of the law tests, the seeds 80% power would need, and Holm's adjustment over a table.

The tests are those of :mod:`memcap.laws`.

Each function answers "how likely was this test to decide, and how many seeds per setting
would it need to decide four times in five?" at a stated effect and the measured noise:

- one-sided t-tests (paired changes, a bound): ``statsmodels``' :class:`TTestPower`
  (noncentral t);
- two one-sided tests (TOST): the exact probability that the (1 − 2α) interval lies inside
  the margins, integrated over the sample standard deviation's χ distribution;
- the lack-of-fit F-test: the noncentral F at the noncentrality the observed F estimates,
  which grows in proportion to the seeds per value;
- the Jonckheere–Terpstra trend: simulated seeds (normal, each value's measured mean and
  standard deviation), each decided by J's normal approximation.

Seeds are searched up to ``SEEDS_LIMIT``; a test that cannot reach ``TARGET`` there (an effect
of the wrong sign, or none) needs ``inf`` seeds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from scipy import integrate, stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

TARGET = 0.80  # the power the seeds are counted for
SEEDS_LIMIT = 1000
SIMULATIONS = 1000  # simulated runs per power of the trend test
TREND_LIMIT = 50  # the trend's power is simulated: seeds searched up to here


def smallest_seeds(
    power: Callable[[int], float], start: int = 2, limit: int = SEEDS_LIMIT
) -> float:
    """The smallest seed count n ≥ ``start`` with ``power(n) ≥ TARGET`` (power rising in n):
    doubling, then bisection; ``inf`` when ``limit`` seeds do not reach it."""
    low, high = start, start
    while power(high) < TARGET:
        if high >= limit:
            return float("inf")
        low, high = high + 1, min(2 * high, limit)
    while low < high:
        middle = (low + high) // 2
        low, high = (middle + 1, high) if power(middle) < TARGET else (low, middle)
    return float(high)


def one_sided_t(effect: float, seeds: int, alpha: float) -> float:
    """Power of a one-sided one-sample (or paired) t-test at the standardized ``effect``
    (mean distance past the null over the standard deviation, positive towards rejection)."""
    if not np.isfinite(effect):
        return 1.0 if effect > 0 else 0.0
    return float(TTestPower().power(effect, seeds, alpha, alternative="larger"))


def one_sided_t_seeds(effect: float, alpha: float) -> float:
    """Seeds a one-sided t-test at ``effect`` needs for ``TARGET`` power."""
    if not effect > 0:
        return float("inf")
    return smallest_seeds(lambda n: one_sided_t(effect, n, alpha))


def tost(offset: float, low: float, high: float, seeds: int, alpha: float) -> float:
    """Power of TOST that the mean lies in (``low``, ``high``) (both in standard deviations)
    when it truly lies at ``offset``: P(mean − t·se > low and mean + t·se < high)."""
    if seeds < 2:
        return 0.0
    root, dof = np.sqrt(seeds), seeds - 1
    t = stats.t.ppf(1 - alpha, dof)

    def inside(chi2: float) -> float:
        half = t * np.sqrt(chi2 / dof)  # the interval's half-width in standard errors
        upper = stats.norm.cdf((high - offset) * root - half)
        lower = stats.norm.cdf((low - offset) * root + half)
        return max(0.0, float(upper - lower)) * stats.chi2.pdf(chi2, dof)

    # the inside vanishes once the half-width passes the margins: integrate up to there
    edge = dof * ((high - low) * root / (2 * t)) ** 2
    if edge <= 0:
        return 0.0
    value, _ = integrate.quad(inside, 0.0, edge, limit=200)
    return min(1.0, value)


def tost_seeds(offset: float, low: float, high: float, alpha: float) -> float:
    """Seeds TOST needs for ``TARGET`` power (``inf`` when ``offset`` lies outside)."""
    if not low < offset < high:
        return float("inf")
    return smallest_seeds(lambda n: tost(offset, low, high, n, alpha))


def lack_of_fit(
    statistic: float, df_lof: int, df_pe: int, values: int, seeds: float, level: float
) -> tuple[float, float]:
    """Power of the lack-of-fit F-test (rejecting at ``level``) at the departure the observed F
    estimates, and the seeds per value that ``TARGET`` power needs. The noncentrality
    estimate λ = F·df_lof·(df_pe − 2)/df_pe − df_lof (unbiased, floored at 0) grows with the
    seeds per value, the pure error's degrees of freedom as values·(seeds − 1)."""
    scale = df_pe / max(values * (seeds - 1), 1)  # keeps unequal seed counts' df at n = seeds
    lam = max(0.0, statistic * df_lof * (df_pe - 2) / df_pe - df_lof) if df_pe > 2 else 0.0

    def power(n: float) -> float:
        dof = max(values * (n - 1) * scale, 1.0)
        critical = stats.f.isf(level, df_lof, dof)
        return float(stats.ncf.sf(critical, df_lof, dof, lam * n / seeds))

    needed = float("inf") if lam == 0 else smallest_seeds(power)
    return power(seeds), needed


def curvature(
    basis: np.ndarray,
    levels: np.ndarray,
    means: np.ndarray,
    counts: np.ndarray,
    weights: np.ndarray,
    pure_error: float,
    size: float,
    level: float,
) -> tuple[float, float]:
    """Power of the lack-of-fit F-test (rejecting at ``level``) against a quadratic bend: the
    per-value means off the fitted form by a parabola over the swept range whose largest
    departure from the form is ``size`` of the mean there (relative to the per-value mean
    where the fit is weighted by 1/mean², to the overall mean otherwise), with the measured
    pure error; and the seeds per value that ``TARGET`` power needs.

    ``basis`` is the form's design at ``levels``; ``counts`` the seeds per value, ``weights``
    each value's weight, ``pure_error`` the (weighted) pure-error mean square."""
    shift = bend_shift(basis, levels, means, counts * weights, size, relative=np.ptp(weights) > 0)
    if shift is None or pure_error <= 0:
        return float("nan"), float("nan")
    lam_per_seed = float(np.sum(weights * shift**2) / pure_error)
    values, df_lof = len(levels), len(levels) - basis.shape[1]

    def power(n: float) -> float:
        dof = max(values * (n - 1), 1.0)
        critical = stats.f.isf(level, df_lof, dof)
        return float(stats.ncf.sf(critical, df_lof, dof, lam_per_seed * n))

    seeds = float(counts.mean())
    return power(seeds), smallest_seeds(power)


def bend_shift(
    basis: np.ndarray,
    levels: np.ndarray,
    means: np.ndarray,
    weights: np.ndarray,
    size: float,
    relative: bool,
) -> np.ndarray | None:
    """The per-value shift of a quadratic bend that the form's (``weights``-weighted) fit
    cannot absorb, scaled so that its largest departure is ``size`` of the mean there
    (``relative``) or of the overall mean; None when the form absorbs every bend."""
    scale = means if relative else np.full_like(means, means.mean())
    centred = (levels - levels.mean()) / max(np.ptp(levels), 1e-12)
    bend = scale * centred**2
    root = np.sqrt(weights)
    coef = np.linalg.lstsq(basis * root[:, None], bend * root, rcond=None)[0]
    shift = bend - basis @ coef
    largest = np.abs(shift / scale).max()
    return None if largest <= 1e-12 else size * shift / largest


def jonckheere(*groups: np.ndarray, axis: int = -1) -> np.ndarray:
    """Jonckheere–Terpstra statistic over groups in increasing x (vectorised over ``axis``):
    pairs of a smaller and a larger x's values that increase, ties counted half (each pair of
    groups' Mann–Whitney U from mid-ranks)."""
    groups = [np.moveaxis(np.asarray(g, dtype=float), axis, -1) for g in groups]
    total = 0.0
    for i, low in enumerate(groups):
        for high in groups[i + 1 :]:
            ranks = stats.rankdata(np.concatenate([low, high], -1), axis=-1)[..., low.shape[-1] :]
            size = high.shape[-1]
            total = total + ranks.sum(-1) - size * (size + 1) / 2
    return np.asarray(total, dtype=float)


def trend(means: Sequence[float], sds: Sequence[float], seeds: int, alpha: float) -> float:
    """Simulated power of the Jonckheere–Terpstra trend test (one-sided at ``alpha``, J's normal
    approximation) with ``seeds`` normal draws at each x's mean and standard deviation."""
    means, sds = np.asarray(means, float), np.asarray(sds, float)
    rng = np.random.default_rng(0)
    draws = means[:, None, None] + sds[:, None, None] * rng.normal(
        size=(len(means), SIMULATIONS, seeds)
    )
    j = jonckheere(*draws)
    total, sizes = len(means) * seeds, np.full(len(means), seeds)
    mean = (total**2 - np.sum(sizes**2)) / 4
    var = (total**2 * (2 * total + 3) - np.sum(sizes**2 * (2 * sizes + 3))) / 72
    return float(np.mean(stats.norm.sf((j - mean) / np.sqrt(var)) < alpha))


def slope(t_observed: float, seeds: float, values: int, coefficients: int, level: float):
    """Power of the growth term's two-sided ``level`` t-interval excluding 0 upwards at the
    observed t (its noncentrality growing as √seeds), and the seeds ``TARGET`` power needs."""

    def power(n: float) -> float:
        dof = max(values * n - coefficients, 1)
        critical = stats.t.isf(level / 2, dof)
        return float(stats.nct.sf(critical, dof, t_observed * np.sqrt(n / seeds)))

    needed = smallest_seeds(power) if t_observed > 0 else float("inf")
    return power(seeds), needed


def joint(
    powers: Sequence[Callable[[int], float]], seeds: int, limit: int = SEEDS_LIMIT
) -> tuple[float, float]:
    """Power of an intersection-union test that needs every one of its tests (each a power
    function of the seed count) to reject, taken as independent (where they correlate
    positively, a lower bound), at ``seeds``, and the seeds ``TARGET`` power needs."""

    def power(n: int) -> float:
        return float(np.prod([f(n) for f in powers]))

    return power(seeds), smallest_seeds(power, limit=limit)


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjustment over the finite p-values (NaN stays NaN)."""
    p = np.asarray(p_values, dtype=float)
    out = np.full_like(p, np.nan)
    finite = np.isfinite(p)
    if finite.any():
        out[finite] = multipletests(p[finite], method="holm")[1]
    return out
