"""The symmetric decision band: applies, does not apply, too close to call."""

import numpy as np
import pytest

from memcap.numerics import BAND_DECADES, Outcome, kruskal_band, margin_outcome
from memcap.numerics.decision import NULL_DECADES, Reading
from memcap.numerics.tolerance import matrix_rank_rtol


@pytest.mark.parametrize(
    ("margin", "proved", "expected"),
    [
        (BAND_DECADES, False, Outcome.APPLIES),
        (3.0, False, Outcome.APPLIES),
        (0.99, False, Outcome.TOO_CLOSE),
        (0.0, False, Outcome.TOO_CLOSE),
        (-0.99, False, Outcome.TOO_CLOSE),
        (-BAND_DECADES, False, Outcome.DOES_NOT_APPLY),
        (-np.inf, False, Outcome.DOES_NOT_APPLY),
        (3.0, True, Outcome.DOES_NOT_APPLY),
    ],
)
def test_margin_outcome(margin, proved, expected):
    assert margin_outcome(margin, proved) is expected


def near_dependent(relative: float, t: int = 30, d: int = 32, seed: int = 0) -> np.ndarray:
    """Independent float32 unit queries, except that query t-1 is query 0 + query 1 plus a
    perturbation of norm ``relative``."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((t, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    direction = rng.standard_normal(d)
    x[-1] = x[0] + x[1] + relative * direction / np.linalg.norm(direction)
    return x.astype(np.float32)


def test_clear_independence_applies_and_exact_dependence_does_not():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((60, 32)).astype(np.float32)
    band = kruskal_band(x, 40, seed=0)
    assert band.outcome(16, min_samples=30) is Outcome.APPLIES
    assert band.outcome(33) is Outcome.DOES_NOT_APPLY  # k > d
    assert band.outcome(61) is Outcome.DOES_NOT_APPLY  # k > d too: checked first
    duplicated = np.vstack([x, x[:1]])
    assert kruskal_band(duplicated, 40).outcome(2) is Outcome.DOES_NOT_APPLY


@pytest.mark.parametrize(
    ("relative", "expected", "reading"),
    [
        (1e-9, Outcome.DOES_NOT_APPLY, Reading.DEPENDENT),  # the triple is a proved circuit
        (3e-5, Outcome.TOO_CLOSE, Reading.LESS),  # within a decade of the error
        (1e-1, Outcome.APPLIES, Reading.LESS),  # clear of the error, yet not random data
    ],
)
def test_a_near_sum_is_decided_against_the_measured_error(relative, expected, reading):
    # δ = 1e-6: zero when σ_min ≤ 2e-6 × the largest norm (√2), clear a decade above
    band = kruskal_band(near_dependent(relative), 400, seed=0, scaling="none", error=1e-6)
    decision = band.decision(16)
    assert band.outcome(16, min_samples=30) is expected
    assert decision.reading is reading
    if reading is Reading.DEPENDENT:
        assert band.circuits[0].indices == (0, 1, 29) and band.circuits[0].minimal
        assert band.certified_upper == 2
    else:
        assert decision.decades > NULL_DECADES and not band.circuits


def test_the_tau_rule_stays_beside_it():
    band = kruskal_band(near_dependent(3 * matrix_rank_rtol(32, 32, np.float32)), 400,
                        seed=0, scaling="none")  # fmt: skip
    assert band.profile.p[16] < 1.0  # so below 1 at 10·τ too: the strict search stops short
    assert np.isnan(band.strict.p[16]) and band.strict.p[2] == 1.0
    assert band.loose.p[16] == 1.0
    assert band.tau_outcome(16, min_samples=30) is Outcome.TOO_CLOSE
    assert band.strict.estimate <= band.profile.estimate <= band.loose.estimate


def test_band_profiles_search_only_as_far_as_the_decided_sizes_need():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((60, 32)).astype(np.float32)
    full = kruskal_band(x, 40, seed=0)
    cut = kruskal_band(x, 40, seed=0, decide=(8,))
    assert cut.profile.p.tolist() == full.profile.p.tolist()  # the reported P(k) is whole
    assert np.isnan(cut.strict.p[9:]).all() and cut.strict.p[8] == full.strict.p[8]
    assert cut.outcome(8, min_samples=30) is full.outcome(8, min_samples=30)


def test_too_few_samples_cannot_apply():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((60, 32)).astype(np.float32)
    assert kruskal_band(x, 5).outcome(8, min_samples=30) is Outcome.TOO_CLOSE


def test_untestable_k_is_none():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((10, 32)).astype(np.float32)
    assert kruskal_band(x, 10).outcome(12) is None
