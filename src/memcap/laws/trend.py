"""Whether a quantity grows with x: the Jonckheere–Terpstra trend test on seed-level data.

J counts the pairs of seeds at a smaller and a larger x that increase (ties half); its
one-sided p-values, both ways, come from a permutation test of the seeds across x. p <
``ALPHA`` holds; a decrease significant at ``ALPHA`` fails. Where inconclusive, the trend's
simulated power at the measured means and spread.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from scipy import stats

from memcap.laws import censored
from memcap.laws import power as law_power
from memcap.laws.common import (
    ALPHA,
    PERMUTATIONS,
    TESTS,
    LawTest,
    no_test,
    p_text,
    points,
    untestable,
    with_power,
)


def decide_grows(x, y, seed: int = 0, power: bool = True, lower=None) -> LawTest:
    """Whether y increases with x: Jonckheere–Terpstra, permutation p-values both ways; where
    inconclusive (and ``power``), the trend's simulated power at the measured means and spread
    (``extra["trend"]``: that power as a function of the seeds). ``lower`` flags the points
    that are lower bounds: where any is, the pairs are scored by Gehan's rule
    (:func:`memcap.laws.censored.gehan_jonckheere`), the flags permuted with the values."""
    flags = np.zeros(np.shape(x), bool) if lower is None else np.asarray(lower, dtype=bool)
    keep = np.isfinite(np.asarray(x, dtype=float)) & np.isfinite(np.asarray(y, dtype=float))
    x, y = points(x, y)
    flags = flags[keep]
    levels = np.unique(x)
    groups = [y[x == level] for level in levels]
    if len(levels) < 2:
        return untestable("grows", f"{len(levels)} value")
    if min(len(g) for g in groups) < 2:  # the permutation reference needs replicates
        return no_test("grows", "fewer than two seeds at some value")
    statistic_of = law_power.jonckheere
    samples = groups
    if flags.any():
        statistic_of = censored.gehan_jonckheere(y, flags)
        samples = [np.flatnonzero(x == level) for level in levels]
    result = stats.permutation_test(
        samples,
        statistic_of,
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
