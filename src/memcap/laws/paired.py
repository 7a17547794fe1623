"""The law tests on seeds paired across x: growth steps, no gain, alike, bounds, published values.

Steps of growth and where they stop, no gain beyond a reference (non-superiority), two models
alike (TOST), means above bounds or within a tolerance of published values; :mod:`memcap.laws`
re-exports them."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from memcap.laws import censored
from memcap.laws import power as law_power
from memcap.laws.common import (
    ALPHA,
    MARGIN,
    TESTS,
    LawTest,
    no_test,
    one_sample,
    outcome_of,
    spread,
    untestable,
    with_power,
)


def paired_change(reference, other) -> np.ndarray:
    reference, other = np.asarray(reference, dtype=float), np.asarray(other, dtype=float)
    if reference.shape != other.shape or len(reference) < 2:
        raise ValueError("a paired change needs at least two paired seeds")
    if np.any(reference <= 0):
        raise ValueError("a relative change needs a positive reference")
    return other / reference - 1.0


@dataclass(frozen=True)
class Step:
    """The paired relative change from one x to the next and its one-sided p-values."""

    start: float
    end: float
    change: float  # mean over seeds of y(end) / y(start) − 1
    sd: float
    seeds: int
    p_up: float
    p_down: float
    bounds: tuple[tuple[float, ...], tuple[float, ...]] | None = None  # censored: (low, high)

    def below(self, margin: float) -> tuple[float, float]:
        """The change's one-sided 95% upper bound and the p-value of "below ``margin``"
        (one-sided t on the paired seeds; censored: the likelihood-ratio t of
        :func:`memcap.laws.censored.one_sample`, the bound at its mean and spread)."""
        if self.bounds is not None:
            p = censored.one_sample(*self.bounds, margin, "less")[1]
            se = self.sd / np.sqrt(self.seeds)
            return self.change + float(stats.t.ppf(1 - ALPHA, self.seeds - 1)) * se, p
        if self.seeds < 2 or self.sd == 0:
            return self.change, 0.0 if self.change < margin else 1.0
        se = self.sd / np.sqrt(self.seeds)
        upper = self.change + float(stats.t.ppf(1 - ALPHA, self.seeds - 1)) * se
        return upper, float(stats.t.cdf((self.change - margin) / se, self.seeds - 1))

    def describe(self, name: str) -> str:
        lower = ""
        if self.bounds is not None:
            lower = f", {int(np.sum(np.not_equal(*self.bounds)))} censored"
        return (
            f"{name} {self.start:g} → {self.end:g}: {self.change:+.1%} (SD {self.sd:.1%}"
            f"{lower}), p = {self.p_up:.3g} up, {self.p_down:.3g} down"
        )


def steps(table: pd.DataFrame, lower: pd.DataFrame | None = None) -> list[Step]:
    """Every step between consecutive columns of ``table`` (seeds × x, paired by seed);
    ``lower`` (the same shape) flags the values that are lower bounds: a step with one is
    decided on the censored likelihood (:func:`memcap.laws.censored.one_sample`; ``seeds``
    counts its exact ones)."""
    out = []
    columns = sorted(table.columns)
    for start, end in zip(columns, columns[1:], strict=False):
        change = paired_change(table[start], table[end])
        flags = None if lower is None else (lower[start].to_numpy(bool), lower[end].to_numpy(bool))
        if flags is None or not (flags[0].any() or flags[1].any()):
            up, down = one_sample(change, 0.0, "greater")[1], one_sample(change, 0.0, "less")[1]
            mean, sd, seeds, bounds = change.mean(), change.std(ddof=1), len(change), None
        else:
            low, high, _ = censored.change_intervals(table[start], table[end], *flags)
            _, up, down, mean, sd = censored.both_sides(low, high, 0.0)
            seeds, bounds = int(np.sum(low == high)), (tuple(low), tuple(high))
        out.append(Step(float(start), float(end), float(mean), float(sd), seeds, up, down, bounds))
    return out


def grows_to(
    trend: LawTest,
    table: pd.DataFrame,
    reference: float,
    name: str,
    lower: pd.DataFrame | None = None,
) -> LawTest:
    """The trend ``trend`` and the steps of ``table`` (seeds × x ≤ ``reference``): holds when
    the trend holds and the step into ``reference`` rises significantly, fails on a
    significant fall (the trend or that step) and where growth is measured to stop before
    ``reference`` (the step into it significantly below +``MARGIN``: "stops at x = 4 < 8");
    growth stops at the largest x whose step rises significantly (``extra["stop"]``; the
    smallest x when none does); ``lower`` as :func:`steps` takes it."""
    table = table[[c for c in table.columns if c <= reference]]
    lower = None if lower is None else lower[table.columns]
    walk = steps(table, lower) if len(table) >= 2 else []
    into = [s for s in walk if s.end == reference]
    if not into:
        return no_test("grows", f"no paired step into {name} = {reference:g}")
    step = into[0]
    stop = max((s.end for s in walk if s.p_up < ALPHA), default=float(min(table.columns)))
    upper, p_flat = step.below(MARGIN)
    if trend.outcome == "fails" or step.p_down < ALPHA:
        outcome = "fails"
    elif trend.outcome == "holds" and step.p_up < ALPHA:
        outcome = "holds"
    elif stop < reference and p_flat < ALPHA:  # growth measured to have stopped before it
        outcome = "fails"
    else:
        outcome = "inconclusive"
    detail = f"{trend.detail}; " + "; ".join(s.describe(name) for s in walk)
    if outcome == "fails" and stop < reference and step.p_up >= ALPHA:
        detail += (
            f"; stops at {name} = {stop:g} < {reference:g}: the step into {reference:g} is below "
            f"+{MARGIN:.0%} (95% upper bound {upper:+.1%}, p = {p_flat:.3g})"
        )
    decided = replace(
        trend,
        outcome=outcome,
        test=TESTS["grows to"],
        p_value=max(trend.p_value, step.p_up),
        detail=detail,
        power=float("nan"),
        seeds_needed=float("nan"),
        power_at="",
        extra={"stop": stop, "steps": walk},
    )
    if outcome != "inconclusive":
        return decided
    needs, parts = [], []  # the power functions of what must still reject, and what they are
    simulated = trend.outcome == "inconclusive" and "trend" in trend.extra
    if simulated:
        needs.append(trend.extra["trend"])
        parts.append("the measured trend (simulated)")
    if step.p_up >= ALPHA:
        effect = MARGIN / step.sd if step.sd > 0 else float("inf")
        needs.append(lambda n: law_power.one_sided_t(effect, n, ALPHA))
        parts.append(f"a +{MARGIN:.0%} step into {name} = {reference:g} at its measured spread")
    if not needs:
        return decided
    limit = law_power.TREND_LIMIT if simulated else law_power.SEEDS_LIMIT
    power, needed = law_power.joint(needs, step.seeds, limit=limit)
    return with_power(decided, [(power, needed, " and ".join(parts))])


def decide_saturates(
    reference,
    others: dict[float, Any],
    margin: float = MARGIN,
    lower: tuple[Any, dict[float, Any]] | None = None,
) -> LawTest:
    """No gain beyond ``reference``: every x in ``others`` (paired seed arrays) below
    +``margin`` by a one-sided non-superiority t-test of the paired relative change (the
    largest p over x); fails when one change lies significantly above +margin (at ALPHA over
    the number of values: Bonferroni). Where inconclusive, the power at no change (the claim
    true) and the seeds it would need. ``lower`` (the reference's flags, each x's flags) marks
    lower bounds: a change with one is tested on the censored likelihood."""
    if not others:
        return untestable("saturates", "no value beyond the reference")
    rows = {}
    for x, values in sorted(others.items()):
        change = paired_change(reference, values)
        flags = None if lower is None else (lower[0], lower[1][x])
        if flags is None or not (np.any(flags[0]) or np.any(flags[1])):
            t, below = one_sample(change, margin, "less")
            above = one_sample(change, margin, "greater")[1]
            mean, sd = change.mean(), change.std(ddof=1)
        else:
            low, high, _ = censored.change_intervals(reference, values, *flags)
            t, above, below, mean, sd = censored.both_sides(low, high, margin)
            t = -t  # the "less" side's t
            change = low[low == high]  # the exact seeds: the t's degrees of freedom
        se = float(sd / np.sqrt(len(change)))
        upper = float(mean) + stats.t.ppf(1 - ALPHA, len(change) - 1) * se
        rows[x] = (change, t, below, above, upper, float(mean), float(sd))
    worst = max(rows, key=lambda x: rows[x][2])
    outcome = outcome_of(
        all(r[2] < ALPHA for r in rows.values()),
        any(r[3] < ALPHA / len(rows) for r in rows.values()),  # Bonferroni over the values
    )
    detail = "; ".join(
        f"{x:g}: {m:+.1%} (95% upper bound {u:+.1%}, {len(c)} seeds), p = {p:.3g}"
        for x, (c, _, p, _, u, m, _) in rows.items()
    )
    decided = LawTest(
        "saturates", outcome, TESTS["saturates"], rows[worst][1], rows[worst][2], detail
    )
    if outcome != "inconclusive":
        return decided
    effects = [  # no spread: decided by the mean; none measured (too few exact seeds): no power
        margin / sd if sd > 0 else np.inf if sd == 0 else 0.0 for *_, sd in rows.values()
    ]
    power, needed = law_power.joint(
        [lambda n, e=e: law_power.one_sided_t(e, n, ALPHA) for e in effects], len(reference)
    )
    return with_power(decided, [(power, needed, "no gain (the claim true) at the measured spread")])


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
    sd: float = float("nan")  # the per-seed changes' standard deviation

    @property
    def equivalent(self) -> bool:
        return self.p_value < ALPHA

    def power(self, seeds: int | None = None) -> float:
        """TOST's power at no change (the two alike) with ``seeds`` (default: its own)."""
        if not self.sd > 0:
            return 1.0
        bound = self.margin / self.sd
        return law_power.tost(0.0, -bound, bound, seeds or self.seeds, ALPHA)


def equivalence(reference, other, margin: float = MARGIN) -> Equivalence:
    """TOST of the paired relative change other_s / reference_s − 1 within ± ``margin``."""
    change = paired_change(reference, other)
    mean, n = float(change.mean()), len(change)
    sd = float(change.std(ddof=1))
    se = sd / np.sqrt(n)
    half = stats.t.ppf(1 - ALPHA, n - 1) * se
    if se == 0.0:
        inside = abs(mean) < margin
        t_low = t_high = float("inf") if inside else float("-inf")
        p = 0.0 if inside else 1.0
    else:
        t_low, t_high = (mean + margin) / se, (margin - mean) / se
        p = float(max(stats.t.sf(t_low, n - 1), stats.t.sf(t_high, n - 1)))
    low, high = mean - half, mean + half
    return Equivalence(mean, low, high, float(min(t_low, t_high)), p, n, margin, sd)


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


def decide_above(groups: dict[float, Any], bounds: dict[float, float]) -> LawTest:
    """Every x's mean above its bound: one-sided t-tests, p the largest over x (an
    intersection-union test: holds when every x is significantly above at ``ALPHA``); fails
    when one x is significantly below. Where inconclusive, the power at the observed means."""
    above = {x: one_sample(v, bounds[x], "greater") for x, v in sorted(groups.items())}
    below = [one_sample(v, bounds[x], "less")[1] for x, v in groups.items()]
    worst = max(above, key=lambda x: above[x][1])
    outcome = outcome_of(all(p < ALPHA for _, p in above.values()), min(below) < ALPHA)
    detail = f"least margin at {worst:g}: t = {above[worst][0]:.3g}, p = {above[worst][1]:.3g}"
    decided = LawTest("above", outcome, "one-sided t", above[worst][0], above[worst][1], detail)
    if outcome != "inconclusive":
        return decided
    effects = [
        (float(np.mean(v)) - bounds[x]) / sd for x, v in groups.items() if (sd := spread(v)) > 0
    ]
    if not effects:
        return decided
    power, needed = law_power.joint(
        [lambda n, e=e: law_power.one_sided_t(e, n, ALPHA) for e in effects],
        min(len(v) for v in groups.values()),
    )
    return with_power(decided, [(power, needed, "the observed margins over the bounds")])


def decide_match(
    groups: dict[float, Any], targets: dict[float, float], tolerance: float
) -> LawTest:
    """Every x's mean within ± ``tolerance`` (absolute) of its target: a TOST per x, p the
    largest over x; fails when one x's (1 − 2·ALPHA) interval lies outside the tolerance.
    Where inconclusive, TOST's power at no difference."""
    results = {}
    for x, values in sorted(groups.items()):
        low, high = targets[x] - tolerance, targets[x] + tolerance
        sides = (one_sample(values, low, "greater"), one_sample(values, high, "less"))
        outside = min(one_sample(values, high, "greater")[1], one_sample(values, low, "less")[1])
        results[x] = (min(t for t, _ in sides), max(p for _, p in sides), outside < ALPHA)
    worst = max(results, key=lambda x: results[x][1])
    holds = all(r[1] < ALPHA for r in results.values())
    outcome = outcome_of(holds, any(r[2] for r in results.values()))
    t, p, _ = results[worst]
    detail = f"TOST at ±{tolerance:g}, least conclusive at {worst:g}: p = {p:.3g}"
    decided = LawTest("match", outcome, TESTS["tost"], t, p, detail)
    bounds = [tolerance / sd for v in groups.values() if (sd := spread(v)) > 0]
    if outcome != "inconclusive" or not bounds:
        return decided
    power, needed = law_power.joint(
        [lambda n, b=b: law_power.tost(0.0, -b, b, n, ALPHA) for b in bounds],
        min(len(v) for v in groups.values()),
    )
    return with_power(decided, [(power, needed, "no difference from the published values")])
