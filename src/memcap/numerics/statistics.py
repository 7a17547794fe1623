"""Exact binomial confidence bounds for the sampled fractions of the Kruskal profile.

The beta quantiles come from :func:`scipy.special.betaincinv`, the function behind
``scipy.stats.beta.ppf`` (same values), without importing ``scipy.stats`` (seconds of CPU
in every check job).
"""

from __future__ import annotations

from scipy.special import betaincinv


def clopper_pearson(successes: int, trials: int, level: float = 0.95) -> tuple[float, float]:
    """Exact two-sided binomial confidence interval for a proportion."""
    if trials == 0:
        return 0.0, 1.0
    alpha = 1.0 - level
    lo = 0.0 if successes == 0 else betaincinv(successes, trials - successes + 1, alpha / 2)
    hi = (
        1.0 if successes == trials else betaincinv(successes + 1, trials - successes, 1 - alpha / 2)
    )
    return float(lo), float(hi)


def upper_confidence_bound(successes: int, trials: int, level: float = 0.95) -> float:
    """Exact one-sided upper confidence bound on a proportion (Clopper–Pearson)."""
    if successes == trials:
        return 1.0
    return float(betaincinv(successes + 1, trials - successes, level))
