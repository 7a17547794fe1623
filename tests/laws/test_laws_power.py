"""The power of the law tests and the seeds 80% power needs (memcap.laws.power), each against an
independent computation: simulation of the test itself, SciPy's noncentral distributions, a
brute-force search, Holm's procedure by hand."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from memcap import laws as lt
from memcap.laws import power as law_power


def test_one_sided_t_power_is_the_noncentral_t_and_matches_the_test_simulated():
    effect, seeds = 0.77, 5  # the default run: a 10% margin over a change with SD 13%
    critical = stats.t.ppf(0.95, seeds - 1)
    exact = stats.nct.sf(critical, seeds - 1, effect * np.sqrt(seeds))
    assert law_power.one_sided_t(effect, seeds, 0.05) == pytest.approx(exact, rel=1e-6)
    rng = np.random.default_rng(0)
    draws = rng.normal(effect, 1.0, size=(100_000, seeds))
    t = draws.mean(1) / (draws.std(1, ddof=1) / np.sqrt(seeds))
    assert np.mean(t > critical) == pytest.approx(exact, abs=0.006)
    assert law_power.one_sided_t(float("inf"), 5, 0.05) == 1.0


def test_seeds_needed_is_the_smallest_count_reaching_80_percent():
    effect = 0.77
    brute = next(n for n in range(2, 200) if law_power.one_sided_t(effect, n, 0.05) >= 0.8)
    assert law_power.one_sided_t_seeds(effect, 0.05) == brute
    assert law_power.one_sided_t(effect, brute - 1, 0.05) < 0.8
    # an effect the wrong way, or none: no seed count reaches it
    assert law_power.one_sided_t_seeds(-0.3, 0.05) == float("inf")
    assert law_power.smallest_seeds(lambda n: 0.5, limit=40) == float("inf")


def test_tost_power_matches_the_test_simulated():
    bound = 0.10 / 0.07  # ±10% against a change with SD 7% (paper B's AoT against MLP)
    rng = np.random.default_rng(1)
    for offset, seeds in ((0.0, 3), (0.0, 6), (0.5, 6)):
        draws = rng.normal(offset, 1.0, size=(200_000, seeds))
        half = stats.t.ppf(0.95, seeds - 1) * draws.std(1, ddof=1) / np.sqrt(seeds)
        simulated = np.mean((draws.mean(1) - half > -bound) & (draws.mean(1) + half < bound))
        predicted = law_power.tost(offset, -bound, bound, seeds, 0.05)
        assert predicted == pytest.approx(simulated, abs=0.005)
    assert law_power.tost_seeds(0.0, -bound, bound, 0.05) == next(
        n for n in range(2, 100) if law_power.tost(0.0, -bound, bound, n, 0.05) >= 0.8
    )
    assert law_power.tost_seeds(2.0, -bound, bound, 0.05) == float("inf")


def test_lack_of_fit_power_is_the_noncentral_f_at_the_estimated_noncentrality():
    statistic, df_lof, df_pe, values, seeds = 3.84, 3, 12, 6, 3.0
    lam = statistic * df_lof * (df_pe - 2) / df_pe - df_lof
    exact = stats.ncf.sf(stats.f.isf(0.01, df_lof, df_pe), df_lof, df_pe, lam)
    power, needed = law_power.lack_of_fit(statistic, df_lof, df_pe, values, seeds, 0.01)
    assert power == pytest.approx(exact)
    # with n seeds per value: λ grows as n / 3, the pure error's df as 6 (n − 1)
    at = [
        stats.ncf.sf(stats.f.isf(0.01, 3, 6 * (n - 1)), 3, 6 * (n - 1), lam * n / 3)
        for n in range(2, 60)
    ]
    assert needed == next(n for n, p in zip(range(2, 60), at, strict=True) if p >= 0.8)
    assert law_power.lack_of_fit(0.5, 3, 12, 6, 3.0, 0.01)[1] == float("inf")  # λ̂ = 0


def test_an_inconclusive_lack_of_fit_carries_its_power():
    rng = np.random.default_rng(5)
    x = np.repeat(np.arange(1.0, 7.0), 3)
    for _ in range(200):  # draw until the F lands between the levels
        y = 10 + 5 * x + 0.35 * (x - 3.5) ** 2 + rng.normal(0, 3, size=len(x))
        result = lt.decide_form(x, y, "linear")
        if result.outcome == "inconclusive":
            break
    assert result.outcome == "inconclusive"
    df_lof, df_pe = result.extra["df"]
    expected = law_power.lack_of_fit(result.statistic, df_lof, df_pe, 6, 3.0, lt.FAIL_P)
    assert (result.power, result.seeds_needed) == pytest.approx(expected)
    assert "failing at p < 0.01" in result.power_at
    held = lt.decide_form(x, 10 + 5 * x + rng.normal(0, 0.1, len(x)))
    assert held.outcome == "holds" and "20% bend" in held.power_at and held.power > 0.99


@pytest.mark.parametrize(("variance", "cv"), [("proportional", 0.15), ("constant", 0.25)])
def test_a_holding_lack_of_fit_carries_its_power_against_a_20_percent_bend(variance, cv):
    """The stated alternative: the means off the line by a parabola over the swept range whose
    largest departure is 20% of the mean. The power computed from a run that held matches the
    rejection rate simulated under that alternative, for both variance models."""
    levels, seeds, runs = np.array([1.0, 2, 3, 4, 6]), 5, 300
    base = 40 * levels
    relative = variance == "proportional"
    weights = 1 / base**2 if relative else np.ones_like(base)
    shift = law_power.bend_shift(
        lt.design(levels, "linear"), levels, base, weights * seeds, 0.2, relative
    )
    scale = base if relative else base.mean()
    assert np.abs(shift / scale).max() == pytest.approx(0.2)
    rng = np.random.default_rng(11)
    x = np.repeat(levels, seeds)

    def draw(means):
        spread = np.repeat(means, seeds) if relative else base.mean()
        return np.repeat(means, seeds) + spread * cv * rng.standard_normal(len(x))

    rejected = np.mean(
        [lt.decide_form(x, draw(base + shift), variance=variance).p_value < lt.HOLD_P
         for _ in range(runs)]
    )  # fmt: skip
    computed = [lt.decide_form(x, draw(base), variance=variance) for _ in range(60)]
    power = np.median([r.power for r in computed if r.outcome == "holds"])
    assert abs(power - rejected) < 0.12, (power, rejected)
