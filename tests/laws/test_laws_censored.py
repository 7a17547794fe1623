"""The law tests with seeds that are lower bounds (memcap.laws.censored): uncensored they are
exactly the F- and t-tests and Jonckheere–Terpstra, censored they use the bound in the right
direction, and paper A's laws take every unbracketed seed as censored, never as a value. Their
size on simulated censored data is in tests/laws/test_laws_simulated.py."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from memcap import laws as lt
from memcap.laws import censored
from memcap.laws import power as law_power
from memcap.laws.common import design
from memcap.synthetic.laws import decided_on, law_table

H = np.repeat(np.arange(1.0, 7.0), 5)


def _line(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return 45.0 * H * (1 + 0.15 * rng.normal(size=len(H)))


def test_the_likelihood_t_is_the_t_test_when_nothing_is_censored():
    values = np.array([0.12, -0.03, 0.2, 0.08, 0.15])
    t, p, mean, sd = censored.one_sample(*censored.intervals(values, [False] * 5), 0.0, "greater")
    expected = stats.ttest_1samp(values, 0.0, alternative="greater")
    # both maximise a smooth likelihood to gtol 1e-9: agreement to 1e-6 is what BFGS gives
    assert t == pytest.approx(expected.statistic, rel=1e-6)
    assert p == pytest.approx(expected.pvalue, rel=1e-6)
    assert (mean, sd) == pytest.approx((values.mean(), values.std(ddof=1)), rel=1e-6)


def test_the_likelihood_f_is_the_lack_of_fit_f_when_nothing_is_censored():
    y = _line()
    low, high = censored.intervals(y, np.zeros(len(y), bool))
    inverse = np.unique(H, return_inverse=True)[1]
    means = np.bincount(inverse, y) / np.bincount(inverse)
    scale = means[inverse]  # the 1 / mean² weights of the proportional variance model
    pure = censored.level_means(inverse, 6, low, high, scale)
    line = censored.fit(design(H, "linear"), low, high, scale)
    statistic = censored.ratio_f(pure, line, len(y), 4, len(y) - 6)
    exact = lt.decide_form(H, y, "linear", variance="proportional")
    assert statistic == pytest.approx(exact.statistic, rel=1e-6)
    assert line.coef == pytest.approx(exact.coefficients, rel=1e-6)
    assert line.covariance == pytest.approx(np.array(exact.covariance), rel=1e-4)


def test_gehan_scores_are_jonckheere_terpstra_without_censoring():
    rng = np.random.default_rng(1)
    values = np.round(rng.normal(size=20), 1)  # rounding makes ties, which count half
    groups = [np.arange(i, i + 5) for i in range(0, 20, 5)]
    gehan = censored.gehan_jonckheere(values, np.zeros(20, bool))
    assert gehan(*groups) == pytest.approx(law_power.jonckheere(*[values[g] for g in groups]))


def test_a_lower_bound_is_no_evidence_of_a_decrease():
    # x = 1 holds a lower bound 1 below the exact 5 and 6 at x = 2: those pairs are unknown
    # (half each, where taken as a value they were two sure increases); the exact 7 above
    # them is two sure decreases
    values, lower = np.array([1.0, 7.0, 5.0, 6.0]), np.array([True, False, False, False])
    gehan = censored.gehan_jonckheere(values, lower)
    assert gehan(np.array([0, 1]), np.array([2, 3])) == pytest.approx(0.5 + 0.5 + 0 + 0)
    # a lower bound at the larger x above an exact smaller value is a sure increase
    values, lower = np.array([1.0, 2.0, 5.0, 0.5]), np.array([False, False, True, True])
    gehan = censored.gehan_jonckheere(values, lower)
    assert gehan(np.array([0, 1]), np.array([2, 3])) == pytest.approx(1 + 0.5 + 1 + 0.5)


def test_change_intervals_bound_each_seed_the_right_way():
    low, high, keep = censored.change_intervals(
        [100.0, 100.0, 100.0, 100.0], [110.0, 120.0, 90.0, 80.0],
        [False, True, False, True], [False, False, True, True],
    )  # fmt: skip
    assert keep.tolist() == [True, True, True, False]  # both ends bounds: says nothing
    assert low.tolist() == pytest.approx([0.1, -1.0, -0.1])
    assert high.tolist() == pytest.approx([0.1, 0.2, np.inf])


def test_censored_seeds_raise_the_fitted_line_their_values_would_lower():
    rng = np.random.default_rng(3)
    y = _line(3)
    lower = rng.random(len(y)) < 0.3
    observed = np.where(lower, 0.6 * y, y)  # the bounds sit well below the truth
    as_values = lt.decide_form(H, observed, "linear", grows=True, variance="proportional")
    taken = lt.decide_form(H, observed, "linear", grows=True, variance="proportional",
                           lower=lower)  # fmt: skip
    truth = lt.decide_form(H, y, "linear", grows=True, variance="proportional")
    assert abs(taken.extra["slope"] - truth.extra["slope"]) < abs(
        as_values.extra["slope"] - truth.extra["slope"]
    )
    assert taken.test == as_values.test and taken.extra["df"] == (4, int((~lower).sum()) - 6)


def test_decide_counts_the_lower_bounds_and_keeps_their_values():
    rows = pd.DataFrame({"value": H, "seed": np.tile(range(5), 6), "capacity": _line(4)})
    rows["bound"] = (rows["seed"] == 0) & (rows["value"] >= 5)
    result = lt.decide(rows, "grows", lower_bounds="bound", name="H")
    assert "2 of 30 seeds are lower bounds (H = 5, 6), taken as right-censored" in result.detail
    assert result.outcome == "holds"
    plain = lt.decide(rows, "grows", name="H")
    assert "lower bounds" not in plain.detail


def _capacity(bracketed: bool) -> pd.DataFrame:
    rows = []
    for seed in range(4):
        for d_h in (1, 2, 4, 8, 12, 16):
            rows.append({
                "sweep": "head_dim", "context": "shared", "task": "classification", "n": 8,
                "value": d_h, "seed": seed, "capacity": 20.0 * min(d_h, 8) + 3 * seed,
                "bracketed": bracketed or not (seed == 0 and d_h == 8), "censored": False,
                "at_chance": False,
            })  # fmt: skip
    return pd.DataFrame(rows)


def test_paper_a_takes_an_unbracketed_seed_as_censored():
    table = decided_on(_capacity(bracketed=False))
    assert table["lower_bound"].sum() == 1
    assert table.loc[table["lower_bound"], ["seed", "value"]].values.tolist() == [[0, 8]]
    laws = law_table(_capacity(bracketed=False)).set_index("law")
    measured = laws.loc["saturates in d_h beyond n", "measured"]
    assert "1 of 12 seeds are lower bounds (d_h = 8), taken as right-censored" in measured
    assert "≥ 164.5" in measured  # the seed mean at d_h = 8 is a lower bound too
    assert "right-censored" in laws.loc["saturates in d_h beyond n", "criterion"]
    bracketed = law_table(_capacity(bracketed=True)).set_index("law")
    assert "lower bounds" not in bracketed.loc["saturates in d_h beyond n", "measured"]
