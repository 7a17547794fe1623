"""Decisions against the measured error, the random null and exact proofs, on matrices whose
answer is known without any tolerance."""

import numpy as np
import pytest
import torch

from memcap.numerics import Outcome, kruskal_band
from memcap.numerics.decision import (
    DOES_NOT_APPLY,
    TOO_CLOSE,
    Proof,
    Reading,
    decide_size,
    tail_shift,
)
from memcap.numerics.error import ErrorScale, stored_error
from memcap.numerics.null import gaussian_set, null_key, null_ratios
from memcap.numerics.ratios import PrefixRatios, prefix_ratios, resolution
from memcap.numerics.sampling import orderings


def test_a_gaussian_in_general_position_is_never_called_dependent():
    # At k = d about 17% of a Gaussian's d-subsets fall under τ = d·eps32 and 3% under τ/10,
    # so today's rule fails it; against the null it reads as what it is.
    x = np.random.default_rng(0).standard_normal((800, 768)).astype(np.float32)
    band = kruskal_band(x, 200, 0, decide=[64, 768])
    assert band.tau_outcome(768) is Outcome.DOES_NOT_APPLY
    for k in (64, 768):
        decision = band.decision(k)
        assert band.outcome(k, min_samples=30) is Outcome.APPLIES
        assert decision.reading is Reading.RANDOM and decision.proof is None
        assert abs(decision.decades) < 0.5
    assert not band.proofs and band.certified_upper == 768


def test_exact_sums_are_reduced_to_circuits_that_certify_the_kruskal_rank():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, 256)).astype(np.float32)
    pairs = [(0, 1), (2, 3), (4, 5), (6, 7), (8, 9)]
    for i, (a, b) in enumerate(pairs):
        x[250 + i] = x[a] + x[b]  # a float32 sum: dependent up to its rounding
    band = kruskal_band(x, 100, 0, decide=[3, 256])
    assert band.outcome(3) is Outcome.DOES_NOT_APPLY
    assert band.decision(3).reading is Reading.DEPENDENT
    assert band.certified_upper == 2
    found = {c.indices for c in band.circuits}
    assert found == {(a, b, 250 + i) for i, (a, b) in enumerate(pairs)}
    assert all(c.minimal and c.ratio <= c.zero_line for c in band.circuits)


def test_a_larger_exact_relation_is_one_minimal_circuit():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((80, 64)).astype(np.float32)
    x[79] = x[10] - 2 * x[20] + 0.5 * x[30] + x[40]  # up to float32 rounding
    band = kruskal_band(x, 60, 0, decide=[5])
    assert [c.indices for c in band.circuits] == [(10, 20, 30, 40, 79)]
    assert band.circuits[0].minimal and band.circuits[0].second > 1e-3
    assert band.outcome(5) is Outcome.DOES_NOT_APPLY and band.outcome(4) is Outcome.APPLIES


def test_prefix_ratios_match_direct_singular_values():
    rng = np.random.default_rng(1)
    x = torch.as_tensor(rng.standard_normal((120, 96)) * 0.1 + rng.standard_normal(96))
    orders = orderings(120, 20, 0, 96).numpy()
    for k in (8, 96):
        ratios = prefix_ratios(x, orders, k)
        exact = [
            float((s := torch.linalg.svdvals(x[torch.as_tensor(o[:k])]))[-1] / s[0]) for o in orders
        ]
        exact = np.array(exact)
        kept = ~ratios.censored
        np.testing.assert_allclose(ratios.ratio[kept], exact[kept], rtol=0.02)
        assert (exact[~kept] <= resolution(k)).all()  # censored only below the resolution


def test_a_dependent_prefix_is_censored_then_resolved_where_asked():
    x = torch.as_tensor(np.random.default_rng(2).standard_normal((40, 16)))
    x[5] = x[0]
    orders = np.tile(np.arange(40), (1, 1))
    assert prefix_ratios(x, orders, 16).censored.all()
    resolved = prefix_ratios(x, orders, 16, resolve_below=lambda c: resolution(16) / 10 + 0 * c)
    assert not resolved.censored.any() and resolved.ratio[0] < 1e-14 and resolved.svd == 1


def test_the_null_is_a_function_of_its_key():
    x = np.zeros((50, 20), dtype=np.float32)
    key = null_key(x, "equilibrate", 30, 4)
    assert key.name == "T50_d20_float32_equilibrate_S30_seed4"
    assert gaussian_set(key).dtype == torch.float32
    first, again = null_ratios(key, [5, 20]), null_ratios(key, [20])
    np.testing.assert_array_equal(first[20].ratio, again[20].ratio)
    larger = null_ratios(null_key(x, "equilibrate", 60, 4), [20])
    np.testing.assert_array_equal(larger[20].head(30).ratio, first[20].ratio)  # same orderings


def _ratios(values) -> PrefixRatios:
    values = np.asarray(values, dtype=float)
    return PrefixRatios(8, values, np.ones(values.size), np.zeros(values.size, dtype=bool))


ERROR = ErrorScale(1e-6, "test")  # zero line 2e-6, clear line 2e-5
NULL = _ratios(np.random.default_rng(0).uniform(0.1, 0.3, 200))


def test_data_like_the_null_applies_and_reads_as_random():
    decision = decide_size(8, _ratios(np.random.default_rng(1).uniform(0.1, 0.3, 200)), NULL,
                           ERROR)  # fmt: skip
    assert decision.outcome == "applies" and decision.reading is Reading.RANDOM
    assert decision.clear == 200 and decision.zero == 0


def test_a_shifted_tail_clear_of_the_error_applies_and_says_by_how_much():
    data = _ratios(np.full(200, 2e-3))
    decision = decide_size(8, data, NULL, ERROR)
    assert decision.outcome == "applies" and decision.reading is Reading.LESS
    assert decision.decades == pytest.approx(np.log10(np.quantile(NULL.ratio, 0.1) / 2e-3))
    assert f"by {decision.decades:.1f} decades" in decision.text


def test_subsets_within_a_decade_of_the_error_are_too_close_to_call():
    data = _ratios(np.r_[np.full(190, 1e-2), np.full(10, 5e-6)])
    assert decide_size(8, data, NULL, ERROR).outcome == TOO_CLOSE


def test_more_subsets_under_the_zero_line_than_random_data_do_not_apply():
    data = _ratios(np.r_[np.full(170, 1e-2), np.full(30, 1e-7)])
    decision = decide_size(8, data, NULL, ERROR)
    assert decision.outcome == DOES_NOT_APPLY and decision.reading is Reading.LESS
    assert decision.zero == 30 and decision.null_zero == 0 and decision.proof is None


def test_a_proof_decides_every_size_at_or_above_it():
    proof = Proof("circuit", 3, "dependent triple", (0, 1, 2))
    assert decide_size(3, None, None, ERROR, (proof,)).outcome == DOES_NOT_APPLY
    assert decide_size(2, _ratios(np.full(200, 0.2)), NULL, ERROR, (proof,)).outcome == "applies"
    assert decide_size(3, None, None, ERROR, (proof,)).outcome_for(1000) == DOES_NOT_APPLY


def test_tail_shift_of_identical_samples_is_zero_and_not_significant():
    decades, p = tail_shift(NULL.ratio, NULL.ratio)
    assert decades == 0 and p > 0.1


def test_the_stored_dtype_sets_the_scale_without_a_measurement():
    scale = stored_error(np.float32)
    assert scale.relative == pytest.approx(np.finfo(np.float32).eps / 2)
    assert scale.zero_line == pytest.approx(np.finfo(np.float32).eps)
    assert scale.clear_line == pytest.approx(10 * scale.zero_line)
