"""The law tests of memcap.law_tests: each statistic against an independent computation, each
outcome where it should fall, and the tests' behaviour on simulated seeds with the measured
noise (a linear law holds in at least 90% of simulations, a quadratic one fails in most)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from memcap import law_tests as lt

X = np.arange(1, 7, dtype=float)
# The measured noise: seed standard deviation over seed mean of paper A's capacities in the
# default run (results/synthetic/capacity.csv, every setting with 5 seeds; median and the
# spread's upper quartile), used as each setting's own noise (heteroscedastic).
MEASURED_CV = (0.10, 0.20)
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


def test_forms_that_cannot_be_tested_are_inconclusive():
    one_seed = lt.decide_form(X, 3 * X, "linear")
    assert one_seed.outcome == "inconclusive" and "no pure error" in one_seed.detail
    three_values = lt.decide_form(np.repeat(X[:3], 2), np.repeat(X[:3], 2), "quadratic")
    assert three_values.outcome == "inconclusive" and np.isnan(three_values.p_value)
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
    # Six points: every ordering enumerated, so the p-value is exact.
    null = [
        _jonckheere_by_hand([list(p[0:2]), list(p[2:4]), list(p[4:6])])
        for p in itertools.permutations(y)
    ]
    assert result.p_value == pytest.approx(np.mean(np.array(null) >= result.statistic))
    assert result.test == "Jonckheere–Terpstra"


def test_trend_outcomes():
    rng = np.random.default_rng(4)
    up = lt.decide_grows(*_seeds(20 * X, 10.0, 3, rng))
    down = lt.decide_grows(*_seeds(200 - 20 * X, 10.0, 3, rng))
    flat = lt.decide_grows(*_seeds(np.full(6, 50.0), 10.0, 3, rng))
    assert (up.outcome, down.outcome) == ("holds", "fails")
    assert up.p_value < 0.001 and "decrease: p = 1" in up.detail
    assert flat.outcome == "inconclusive"


def test_equivalence_is_two_one_sided_t_tests_of_the_paired_change():
    reference = np.array([100.0, 120.0, 90.0, 110.0, 105.0])
    other = reference * np.array([1.02, 0.97, 1.04, 0.99, 1.01])
    result = lt.equivalence(reference, other)
    change = other / reference - 1
    low = stats.ttest_1samp(change, -0.1, alternative="greater").pvalue
    high = stats.ttest_1samp(change, 0.1, alternative="less").pvalue
    assert result.p_value == pytest.approx(max(low, high))
    assert result.equivalent and not result.outside
    interval = stats.t.interval(0.9, 4, loc=change.mean(), scale=stats.sem(change))
    assert (result.low, result.high) == pytest.approx(interval)


def test_flat_and_compare_outcomes():
    reference = np.array([100.0, 120.0, 90.0, 110.0, 105.0])
    near = reference * np.array([1.02, 0.97, 1.04, 0.99, 1.01])
    far = reference * np.array([1.32, 1.27, 1.34, 1.29, 1.31])
    wide = reference * np.array([1.30, 0.70, 1.20, 0.85, 1.05])
    assert lt.decide_flat(reference, {12: near, 16: near}).outcome == "holds"
    assert lt.decide_flat(reference, {12: near, 16: far}).outcome == "fails"
    assert lt.decide_flat(reference, {12: near, 16: wide}).outcome == "inconclusive"
    slightly_low = reference * np.array([0.86, 0.88, 0.87, 0.85, 0.89])
    assert lt.compare(reference, near)[0] == "alike"
    assert lt.compare(reference, slightly_low)[0] == "lower"
    assert lt.compare(reference, far)[0] == "higher"
    assert lt.compare(reference, wide)[0] == "inconclusive"
    with pytest.raises(ValueError, match="paired"):
        lt.equivalence(reference[:1], near[:1])


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
    assert lt.decide(flat, "flat", x="d_h", reference=8).outcome == "holds"
    assert lt.decide(flat, "grows", x="d_h").test == "Jonckheere–Terpstra"
    assert lt.decide(flat, "flat", x="d_h", reference=32).outcome == "inconclusive"
    with pytest.raises(ValueError, match="unknown law"):
        lt.decide(flat, "exponential", x="d_h")


def _quadratic_bend(sd: np.ndarray, seeds: int, size: float) -> np.ndarray:
    """A bend whose largest departure from its own least-squares line is ``size`` standard
    errors of a setting's seed mean."""
    bend = (X - X.mean()) ** 2
    bend -= np.polyval(np.polyfit(X, bend, 1), X)
    return bend / np.abs(bend).max() * size * float(np.mean(sd)) / np.sqrt(seeds)


@pytest.mark.parametrize("cv", MEASURED_CV)
def test_simulated_linear_law_holds_and_quadratic_fails(cv):
    """Paper A's H sweep shape (6 values, 5 seeds, capacity ≈ 45·H) with the measured noise."""
    rng = np.random.default_rng(6)
    line = 45.0 * X
    sd = cv * line
    simulations = 400
    linear, quadratic = [], []
    for _ in range(simulations):
        x, y = _seeds(line, sd, 5, rng)
        linear.append(lt.decide_form(x, y, "linear", grows=True, variance=PROPORTIONAL).outcome)
        curved = line + _quadratic_bend(sd, 5, 3.0)
        x, y = _seeds(curved, sd, 5, rng)
        quadratic.append(lt.decide_form(x, y, "linear", variance=PROPORTIONAL).outcome)
    assert linear.count("holds") >= 0.9 * simulations
    assert quadratic.count("fails") > 0.5 * simulations


def test_simulated_trend_and_equivalence_error_rates():
    rng = np.random.default_rng(7)
    cv, simulations = MEASURED_CV[1], 100
    grows = [
        lt.decide_grows(*_seeds(20 * X, cv * 20 * X, 5, rng)).outcome for _ in range(simulations)
    ]
    flat = [
        lt.decide_grows(*_seeds(np.full(6, 100.0), cv * 100, 5, rng)).outcome
        for _ in range(simulations)
    ]
    assert grows.count("holds") >= 0.9 * simulations
    assert flat.count("holds") <= 0.1 * simulations  # α = 0.05, with room for the draw
    # TOST at ± 10% never calls a 20% change equivalent more often than its level.
    reference = rng.normal(100, 10, size=(4 * simulations, 8))
    shifted = 1.2 * reference + rng.normal(0, 10, size=reference.shape)
    false = sum(lt.equivalence(r, s).equivalent for r, s in zip(reference, shifted, strict=True))
    assert false <= 0.05 * 4 * simulations
