"""A rank of Z read from its singular values: the floor, the gap, one number or a range."""

import math

import numpy as np
import pytest
import torch

from memcap.capacity.spectrum import (
    GAP_DECADES,
    Spectrum,
    error_floor,
    forward_error,
    read_rank,
)
from memcap.numerics.error import ERROR_FACTOR

F32 = float(np.finfo(np.float32).eps)


def _matrix(singular: np.ndarray, rows: int, cols: int, seed: int = 0) -> np.ndarray:
    """A rows × cols matrix with these singular values, in random orthonormal bases."""
    rng = np.random.default_rng(seed)
    u = np.linalg.qr(rng.standard_normal((rows, len(singular))))[0]
    v = np.linalg.qr(rng.standard_normal((cols, len(singular))))[0]
    return (u * singular) @ v.T


def _spectrum(matrix: np.ndarray) -> Spectrum:
    return Spectrum.of(torch.linalg.svdvals(torch.from_numpy(matrix)).numpy(), matrix.shape)


def test_a_planted_rank_with_a_gap_is_one_number():
    # 12 directions between 1 and 1e-3, then 8 at float32 rounding's level (1e-9)
    singular = np.concatenate([np.logspace(0, -3, 12), np.full(8, 1e-9)])
    spectrum = _spectrum(_matrix(singular, 60, 30))
    reading = read_rank(spectrum, error_floor(spectrum, F32, None))
    assert reading.rank_high == reading.rank_low == 12 and reading.resolved
    assert reading.last_kept == pytest.approx(1e-3, rel=1e-9)
    assert reading.first_dropped == pytest.approx(1e-9, rel=1e-6)
    assert reading.gap_decades == pytest.approx(6.0, abs=1e-6)
    assert reading.kept_decades > 0 > reading.dropped_decades
    assert reading.record()["certified"] == 12


def test_a_continuous_spectrum_through_the_floor_is_not_resolved():
    # 40 values falling by 1.6× each from 1 to ~1e-8: no decade between neighbours anywhere
    singular = 1.6 ** -np.arange(40.0)
    spectrum = _spectrum(_matrix(singular, 80, 50, seed=1))
    floor = error_floor(spectrum, F32, None)
    reading = read_rank(spectrum, floor)
    assert reading.rank_high == int((singular > floor * singular[0]).sum())
    assert reading.rank_low == 0 and not reading.resolved
    assert reading.gap_decades == pytest.approx(math.log10(1.6), abs=1e-6)


def test_a_gap_above_the_floor_bounds_the_range_from_below():
    # 5 strong directions, a decade and a half of gap, then a continuum through the floor
    singular = np.concatenate([np.logspace(0, -1, 5), np.logspace(-2.5, -9, 30)])
    spectrum = _spectrum(_matrix(singular, 70, 40, seed=2))
    reading = read_rank(spectrum, error_floor(spectrum, F32, 1e-5))
    assert reading.rank_low == 5 and reading.rank_high > 5 and not reading.resolved
    assert reading.floor == pytest.approx(ERROR_FACTOR * 1e-5 * spectrum.frobenius)


def test_a_rank_a_decade_above_its_next_but_within_a_decade_of_the_floor_is_resolved():
    # the floor lies in the gap: every resolvable threshold there counts 3
    spectrum = Spectrum(np.array([1.0, 0.5, 3e-6, 1e-12]), (10, 4))
    reading = read_rank(spectrum, 1e-6)
    assert reading.resolved and reading.rank_high == 3
    assert reading.kept_decades == pytest.approx(math.log10(3.0))
    # the floor above the gap's top: the count there is 2 and sits a decade above the next
    assert read_rank(spectrum, 5e-6).rank_high == 2 and read_rank(spectrum, 5e-6).resolved
    # a gap of less than a decade at the floor: the range runs down to the last decade gap
    close = read_rank(Spectrum(np.array([1.0, 2e-2, 4e-6, 1e-6, 4e-7]), (10, 5)), 5e-7)
    assert (close.rank_low, close.rank_high) == (2, 4) and not close.resolved
    assert 10.0**GAP_DECADES == 10.0


def test_the_floor_takes_the_larger_of_rounding_and_twice_the_measured_error():
    spectrum = Spectrum(np.array([1.0, 1.0, 1.0, 1.0]), (3000, 4))  # ‖Z‖_F / σ_max = 2
    assert error_floor(spectrum, F32, None) == pytest.approx(2 * F32)
    assert error_floor(spectrum, F32, 1e-9) == pytest.approx(2 * F32)
    assert error_floor(spectrum, F32, 1e-6) == pytest.approx(2 * ERROR_FACTOR * 1e-6)
    # exact inputs still meet float64's own tolerance max(T, H·d)·ε
    assert error_floor(spectrum, 0.0, None) == pytest.approx(3000 * np.finfo(float).eps)


def test_spectra_pad_z_zeros_and_a_zero_matrix_has_rank_zero():
    spectrum = Spectrum.of(np.array([2.0, 4.0]), (10, 6))
    np.testing.assert_array_equal(spectrum.relative, [1.0, 0.5, 0, 0, 0, 0])
    one = read_rank(Spectrum.of(np.array([3.0]), (50, 8)), 1e-7)
    assert one.rank_high == 1 and one.first_dropped == 0.0 and math.isinf(one.gap_decades)
    zero = read_rank(Spectrum.of(np.zeros(3), (5, 3)), 1e-7)
    assert zero.rank_high == 0 and math.isnan(zero.last_kept) and not zero.resolved


def test_forward_error_is_the_worst_query_or_context_on_the_stored_values():
    record = {
        "queries": {"none": {"vector_worst": 3e-7}, "equilibrate": {"vector_worst": 9e-6}},
        "contexts": {"none": {"matrix_worst": 5e-7}, "equilibrate": {"matrix_worst": 9e-6}},
    }
    assert forward_error({"forward_error": record}) == 5e-7
    assert forward_error({"forward_error": None}) is None and forward_error({}) is None
