"""The law tests of memcap.laws: each statistic against an independent computation and
each outcome where it should fall (their behaviour on simulated seeds at the measured noise:
test_laws_simulated.py)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from memcap import laws as lt

X = np.arange(1, 7, dtype=float)
PROPORTIONAL = "proportional"  # paper A's variance model: the spread a fraction of the mean


def _seeds(means, sd, seeds: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Seed-level points: ``seeds`` draws around each mean with its standard deviation."""
    means, sd = np.asarray(means, float), np.broadcast_to(np.asarray(sd, float), len(means))
    x = np.repeat(np.arange(1, len(means) + 1, dtype=float), seeds)
    return x, np.repeat(means, seeds) + rng.normal(size=len(x)) * np.repeat(sd, seeds)


def test_lack_of_fit_is_the_nested_model_f_test():
    rng = np.random.default_rng(0)
    x, y = _seeds(10 + 5 * X + 0.8 * X**2, 3.0, 4, rng)
    result = lt.decide_form(x, y, "linear")
    # The same F from two least-squares fits: the line, and one mean per x.
    line = np.polyval(np.polyfit(x, y, 1), x)
    means = pd.Series(y).groupby(x).transform("mean").to_numpy()
    sse_line, sse_means = np.sum((y - line) ** 2), np.sum((y - means) ** 2)
    f = ((sse_line - sse_means) / 4) / (sse_means / (len(y) - 6))
    assert result.statistic == pytest.approx(f)
    assert result.p_value == pytest.approx(stats.f.sf(f, 4, len(y) - 6))
    assert result.outcome == "fails" and result.test == "lack-of-fit F"
    assert result.extra["df"] == (4, 18)


def test_a_line_holds_and_its_slope_interval_is_the_ols_interval():
    rng = np.random.default_rng(1)
    x, y = _seeds(30 * X, 4.0, 5, rng)
    result = lt.decide_form(x, y, "linear", grows=True)
    fit = stats.linregress(x, y)
    half = stats.t.ppf(0.975, len(x) - 2) * fit.stderr
    assert result.outcome == "holds"
    assert result.extra["slope"] == pytest.approx(fit.slope)
    assert result.extra["slope_low"] == pytest.approx(fit.slope - half)
    assert result.extra["slope_high"] == pytest.approx(fit.slope + half)
    # The band at the data's x is the fitted line ± t · its standard error there.
    mean, low, high = result.band(X)
    se = np.sqrt(
        fit.stderr**2 * (X - x.mean()) ** 2
        + (fit.intercept_stderr**2 - fit.stderr**2 * x.mean() ** 2)
    )
    assert mean == pytest.approx(fit.intercept + fit.slope * X)
    assert high - mean == pytest.approx(half / fit.stderr * se, rel=1e-6)
    assert np.all(low < mean)


def test_growth_term_decides_a_line_that_does_not_grow():
    rng = np.random.default_rng(2)
    flat_x, flat_y = _seeds(np.full(6, 100.0), 10.0, 5, rng)
    assert lt.decide_form(flat_x, flat_y, "linear", grows=True).outcome == "inconclusive"
    assert lt.decide_form(flat_x, flat_y, "linear").outcome == "holds"
    down_x, down_y = _seeds(200 - 20 * X, 5.0, 5, rng)
    assert lt.decide_form(down_x, down_y, "linear", grows=True).outcome == "fails"


def test_proportional_variance_is_weighted_least_squares_and_scale_free():
    rng = np.random.default_rng(8)
    x, y = _seeds(40 * X, 0.15 * 40 * X, 5, rng)
    result = lt.decide_form(x, y, "linear", variance=PROPORTIONAL)
    means = pd.Series(y).groupby(x).transform("mean").to_numpy()
    w = 1 / means**2
    fit = np.polyfit(x, y, 1, w=np.sqrt(w))  # polyfit weights multiply the residuals
    sse = np.sum(w * (y - np.polyval(fit, x)) ** 2)
    pure = np.sum(w * (y - means) ** 2)
    assert result.statistic == pytest.approx(((sse - pure) / 4) / (pure / (len(y) - 6)))
    assert result.coefficients == pytest.approx(fit[::-1])
    # the capacity's units do not matter
    scaled = lt.decide_form(x, 7 * y, "linear", variance=PROPORTIONAL)
    assert scaled.p_value == pytest.approx(result.p_value)
    with pytest.raises(ValueError, match="variance model"):
        lt.decide_form(x, y, "linear", variance="poisson")


@pytest.mark.parametrize(
    ("form", "knot", "means"),
    [
        ("quadratic", float("nan"), 0.1 + 0.02 * X + 0.01 * X**2),
        ("hinge", 4.0, 0.2 + 0.1 * np.minimum(X, 4.0)),
    ],
)
def test_quadratic_and_hinge_forms(form, knot, means):
    rng = np.random.default_rng(3)
    x, y = _seeds(means, 0.005, 3, rng)
    assert lt.decide_form(x, y, form, knot).outcome == "holds"
    # The line cannot follow either curve at this noise.
    assert lt.decide_form(x, y, "linear").outcome == "fails"


def test_forms_that_cannot_be_tested_name_why():
    one_seed = lt.decide_form(X, 3 * X, "linear")
    assert one_seed.outcome == "inconclusive" and "no pure error" in one_seed.detail
    # too few values for the form: the grid's limit, not the seeds'
    three_values = lt.decide_form(np.repeat(X[:3], 2), np.repeat(X[:3], 2), "quadratic")
    assert three_values.outcome == lt.UNTESTABLE == "untestable on this grid"
    assert np.isnan(three_values.p_value) and "3 values; the form has 3" in three_values.detail
    # Replicates that agree exactly: a line through them holds, a bend fails.
    exact = np.repeat(X, 2)
    assert lt.decide_form(exact, 2 * exact, "linear").p_value == 1.0
    assert lt.decide_form(exact, exact**2, "linear").outcome == "fails"
    with pytest.raises(ValueError, match="knot"):
        lt.design(X, "hinge")


def _jonckheere_by_hand(groups: list[list[float]]) -> float:
    return sum(
        (b > a) + 0.5 * (b == a)
        for i, low in enumerate(groups)
        for high in groups[i + 1 :]
        for a in low
        for b in high
    )


def test_jonckheere_statistic_and_exact_permutation_p_value():
    groups = [[1.0, 3.0], [2.0, 2.0], [4.0, 5.0]]
    x = np.repeat([1.0, 2.0, 3.0], 2)
    y = np.concatenate(groups)
    result = lt.decide_grows(x, y)
    assert result.statistic == _jonckheere_by_hand(groups)
    # Six points: every ordering enumerated, so the p-value is exact (no floor).
    null = np.array(
        [
            _jonckheere_by_hand([list(p[0:2]), list(p[2:4]), list(p[4:6])])
            for p in itertools.permutations(y)
        ]
    )
    assert result.p_value == pytest.approx(np.mean(null >= result.statistic))
    assert f"decrease: p = {np.mean(null <= result.statistic):.3g}" in result.detail
    assert result.test == "Jonckheere–Terpstra" and result.p_floor == 0.0


def test_a_permutation_p_value_at_its_floor_reads_as_a_bound():
    rng = np.random.default_rng(11)
    x, y = _seeds(20 * X, 2.0, 5, rng)  # every pair increases: no resample reaches J
    result = lt.decide_grows(x, y)
    floor = 1 / (lt.PERMUTATIONS + 1)
    assert result.p_floor == pytest.approx(floor) and result.p_value == pytest.approx(floor)
    assert "p ≤ 0.0001 (decrease: p = 1)" in result.detail
    assert lt.p_text(result.p_value, result.p_floor) == "p ≤ 0.0001"
    assert lt.p_text(0.0123, result.p_floor) == "p = 0.0123"
    assert lt.p_text(0.00005) == "p = 5e-05"  # an exact or parametric p is never a bound


def test_trend_outcomes():
    rng = np.random.default_rng(4)
    up = lt.decide_grows(*_seeds(20 * X, 10.0, 3, rng))
    down = lt.decide_grows(*_seeds(200 - 20 * X, 10.0, 3, rng))
    flat = lt.decide_grows(*_seeds(np.full(6, 50.0), 10.0, 3, rng))
    assert (up.outcome, down.outcome) == ("holds", "fails")
    assert up.p_value < 0.001 and "decrease: p = 1" in up.detail
    assert np.isnan(up.power) and np.isnan(up.seeds_needed) and up.power_at == ""
    # beside the inconclusive one: the trend's simulated power at its measured means and spread
    assert flat.outcome == "inconclusive" and 0 <= flat.power <= 0.5
    assert flat.seeds_needed >= 3 and "simulated" in flat.power_at
    assert np.isnan(lt.decide_grows(*_seeds(np.full(6, 50.0), 10.0, 3, rng), power=False).power)


def test_equivalence_is_two_one_sided_t_tests_of_the_paired_change():
    reference = np.array([100.0, 120.0, 90.0, 110.0, 105.0])
    other = reference * np.array([1.02, 0.97, 1.04, 0.99, 1.01])
    result = lt.equivalence(reference, other)
    change = other / reference - 1
    low = stats.ttest_1samp(change, -0.1, alternative="greater").pvalue
    high = stats.ttest_1samp(change, 0.1, alternative="less").pvalue
    assert result.p_value == pytest.approx(max(low, high))
    assert result.equivalent and result.sd == pytest.approx(change.std(ddof=1))
    interval = stats.t.interval(0.9, 4, loc=change.mean(), scale=stats.sem(change))
    assert (result.low, result.high) == pytest.approx(interval)


def test_compare_outcomes():
    reference = np.array([100.0, 120.0, 90.0, 110.0, 105.0])
    near = reference * np.array([1.02, 0.97, 1.04, 0.99, 1.01])
    far = reference * np.array([1.32, 1.27, 1.34, 1.29, 1.31])
    wide = reference * np.array([1.30, 0.70, 1.20, 0.85, 1.05])
    slightly_low = reference * np.array([0.86, 0.88, 0.87, 0.85, 0.89])
    assert lt.compare(reference, near)[0] == "alike"
    assert lt.compare(reference, slightly_low)[0] == "lower"
    assert lt.compare(reference, far)[0] == "higher"
    assert lt.compare(reference, wide)[0] == "inconclusive"
    with pytest.raises(ValueError, match="paired"):
        lt.equivalence(reference[:1], near[:1])


def test_saturation_is_a_one_sided_non_superiority_test_at_the_margin():
    reference = np.array([180.0, 200.0, 160.0, 190.0, 170.0])
    factors = {
        12: np.array([0.92, 0.97, 0.88, 0.95, 0.90]),  # a loss: below +10%
        16: np.array([1.01, 0.96, 1.03, 0.99, 0.98]),  # no change
    }
    result = lt.decide_saturates(reference, {x: reference * f for x, f in factors.items()})
    # each value's p: the one-sided t-test that the mean change lies below +10%
    expected = {
        x: stats.ttest_1samp(f - 1, lt.MARGIN, alternative="less").pvalue
        for x, f in factors.items()
    }
    assert result.p_value == pytest.approx(max(expected.values()))
    assert result.outcome == "holds" and result.test == "non-superiority t"
    assert "16: -0.6% (95% upper bound" in result.detail
    # a steady loss holds too: the claim is that gains stop, not that nothing changes
    loss = lt.decide_saturates(reference, {12: reference * 0.7 * factors[16]})
    assert loss.outcome == "holds"
    # a gain beyond the margin in every seed fails; a scattered one is inconclusive, with the
    # power at no change and the seeds 80% power needs
    gain = lt.decide_saturates(reference, {12: reference * 1.3 * factors[16]})
    assert gain.outcome == "fails"
    wide = lt.decide_saturates(reference, {12: reference * np.array([1.3, 0.7, 1.2, 0.85, 1.05])})
    assert wide.outcome == "inconclusive" and 0 < wide.power < 0.8 and wide.seeds_needed > 5
    assert wide.power_at.startswith("no gain")
    assert lt.decide_saturates(reference, {}).outcome == lt.UNTESTABLE


def test_steps_and_growth_up_to_a_reference():
    # Paired seeds: growth from x = 1 to 4, none from 4 to 8 (the default run's d_h shape).
    base = np.array([100.0, 95.0, 120.0, 108.0, 102.0])
    table = pd.DataFrame(
        {1.0: base, 2.0: base * [1.2, 1.4, 1.5, 1.35, 1.25], 4.0: base * [1.9, 2.3, 1.8, 1.9, 1.7]}
    )
    table[8.0] = table[4.0] * [0.77, 0.96, 0.95, 1.02, 0.85]
    walk = lt.steps(table)
    assert [(s.start, s.end) for s in walk] == [(1, 2), (2, 4), (4, 8)]
    last = table[8.0] / table[4.0] - 1
    assert walk[-1].change == pytest.approx(last.mean())
    assert walk[-1].p_up == pytest.approx(stats.ttest_1samp(last, 0, alternative="greater").pvalue)
    assert walk[-1].p_down == pytest.approx(stats.ttest_1samp(last, 0, alternative="less").pvalue)
    rows = table.reset_index(names="seed").melt(id_vars="seed", var_name="d_h", value_name="y")
    result = lt.decide(rows, "grows", x="d_h", y="y", reference=8, name="d_h")
    # the trend holds over 1..8, but growth stops at 4 < 8, measured: the step into 8 lies
    # significantly below +10% (one-sided t on the paired changes), so the law fails there
    assert lt.decide(rows, "grows", x="d_h", y="y").outcome == "holds"
    assert result.outcome == "fails" and result.extra["stop"] == 4.0
    assert result.test == "Jonckheere–Terpstra + step t"
    assert result.p_value == pytest.approx(walk[-1].p_up)  # the larger of trend and step
    below = stats.ttest_1samp(last, 0.10, alternative="less").pvalue
    assert "d_h 4 → 8: -9.0%" in result.detail and f"p = {below:.3g})" in result.detail
    assert "stops at d_h = 4 < 8: the step into 8 is below +10%" in result.detail
    upper = last.mean() + stats.t.ppf(0.95, 4) * last.std(ddof=1) / np.sqrt(5)
    assert f"95% upper bound {upper:+.1%}" in result.detail
    # a step into 8 too noisy to place below +10%: inconclusive, with its power
    noisy = table.copy()
    noisy[8.0] = table[4.0] * [0.8, 1.3, 0.9, 1.25, 0.85]
    rows_noisy = noisy.reset_index(names="seed").melt(id_vars="seed", var_name="d_h",
                                                      value_name="y")  # fmt: skip
    open_ = lt.decide(rows_noisy, "grows", x="d_h", y="y", reference=8, name="d_h")
    assert open_.outcome == "inconclusive" and 0 < open_.power < 1
    assert "+10% step into d_h = 8" in open_.power_at and "stops at" not in open_.detail
    # growth into the reference: holds; a significant fall into it fails
    grown = rows.assign(y=np.where(rows["d_h"] == 8.0, rows["y"] * 1.5, rows["y"]))
    assert lt.decide(grown, "grows", x="d_h", y="y", reference=8).outcome == "holds"
    fallen = rows.assign(y=np.where(rows["d_h"] == 8.0, rows["y"] * 0.6, rows["y"]))
    assert lt.decide(fallen, "grows", x="d_h", y="y", reference=8).outcome == "fails"


def test_decide_on_seed_level_rows_leaves_censored_points_out():
    rng = np.random.default_rng(5)
    x, y = _seeds(np.minimum(0.2 * X, 1.0), 0.01, 3, rng)
    rows = pd.DataFrame({"H": x, "seed": np.tile([0, 1, 2], 6), "accuracy": y})
    rows["censored"] = rows.groupby("H")["accuracy"].transform("mean") >= 0.95
    result = lt.decide(rows, "linear", x="H", y="accuracy", censored="censored")
    assert result.outcome == "holds" and "left out: H = 5, 6" in result.detail
    clipped = lt.decide(rows, "linear", x="H", y="accuracy")
    assert clipped.outcome == "fails"
    flat = pd.DataFrame(
        {"d_h": np.repeat([4, 8, 16], 4), "seed": np.tile(range(4), 3), "capacity": 100.0}
    )
    flat.loc[flat["d_h"] == 16, "capacity"] = [101.0, 99.0, 102.0, 100.0]
    assert lt.decide(flat, "saturates", x="d_h", reference=8).outcome == "holds"
    assert lt.decide(flat, "grows", x="d_h").test == "Jonckheere–Terpstra"
    assert lt.decide(flat, "saturates", x="d_h", reference=32).outcome == "inconclusive"
    assert lt.decide(flat, "saturates", x="d_h", reference=16).outcome == lt.UNTESTABLE
    with pytest.raises(ValueError, match="unknown law"):
        lt.decide(flat, "exponential", x="d_h")
