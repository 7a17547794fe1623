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
    assert np.isnan(lt.decide_form(x, 10 + 5 * x + rng.normal(0, 0.1, len(x))).power)


def test_jonckheere_counts_increasing_pairs_with_ties_half():
    rng = np.random.default_rng(2)
    groups = [rng.integers(0, 4, size=(7, 3 + i)).astype(float) for i in range(3)]
    by_hand = [
        sum(
            (b > a) + 0.5 * (b == a)
            for i, low in enumerate(g)
            for high in g[i + 1 :]
            for a in low
            for b in high
        )
        for g in zip(*groups, strict=True)
    ]
    assert law_power.jonckheere(*groups).tolist() == by_hand


def test_trend_power_is_its_level_without_a_trend_and_rises_with_one():
    flat = law_power.trend([100.0] * 6, [15.0] * 6, 5, 0.05)
    assert flat == pytest.approx(0.05, abs=0.02)
    weak = law_power.trend(100 + 4.0 * np.arange(1, 7), [15.0] * 6, 5, 0.05)
    assert 0.3 < weak < law_power.trend(100 + 4.0 * np.arange(1, 7), [15.0] * 6, 10, 0.05)


def test_joint_power_of_tests_that_must_all_reject():
    first, second = (lambda n: min(1.0, 0.1 * n)), (lambda n: min(1.0, 0.05 * n))
    power, needed = law_power.joint([first, second], 5)
    assert power == pytest.approx(0.5 * 0.25)
    assert needed == next(n for n in range(2, 100) if first(n) * second(n) >= 0.8)


def test_holm_adjustment_by_hand_leaves_missing_p_values_missing():
    p = np.array([0.01, 0.04, np.nan, 0.03, 0.2])
    # sorted 0.01, 0.03, 0.04, 0.2 over m = 4: 4·0.01, max(., 3·0.03), max(., 2·0.04), 0.2
    expected = [0.04, 0.09, np.nan, 0.09, 0.2]
    np.testing.assert_allclose(law_power.holm(p), expected)
    assert np.isnan(law_power.holm([np.nan])).all()


def test_paper_b_tests_carry_their_joint_power_where_inconclusive():
    groups = {1.0: np.array([0.30, 0.20, 0.26]), 2.0: np.array([0.50, 0.42, 0.58])}
    # above: both means a little above their bounds, wider than the margin
    above = lt.decide_above(groups, {1.0: 0.24, 2.0: 0.47})
    effects = [(0.2533 - 0.24) / np.std(groups[1.0], ddof=1), (0.5 - 0.47) / 0.08]
    expected = np.prod([law_power.one_sided_t(e, 3, lt.ALPHA) for e in effects])
    assert above.outcome == "inconclusive" and above.power == pytest.approx(expected, rel=0.02)
    assert above.seeds_needed > 3
    # match: the published values within the tolerance, the seeds too few to show it
    match = lt.decide_match(groups, {1.0: 0.25, 2.0: 0.5}, 0.05)
    bounds = [0.05 / np.std(g, ddof=1) for g in groups.values()]
    expected = np.prod([law_power.tost(0.0, -b, b, 3, lt.ALPHA) for b in bounds])
    assert match.outcome == "inconclusive" and match.power == pytest.approx(expected)
    assert match.power_at == "no difference from the published values"
    # a pair of models: TOST's power at no change, at its own seeds or at more
    pair = lt.equivalence(np.array([0.10, 0.12, 0.11]), np.array([0.105, 0.11, 0.12]))
    bound = lt.MARGIN / pair.sd
    assert pair.power() == pytest.approx(law_power.tost(0.0, -bound, bound, 3, lt.ALPHA))
    assert pair.power(12) > pair.power()
