"""What a rank of Z says in words: at a ceiling, tight, a measurement, a range, unresolved."""

import math

from memcap.capacity.ceiling import (
    AT_CEILING,
    NOT_RESOLVED,
    at_ceiling,
    ceiling,
    gap_text,
    granted,
    own_reading,
    rank_text,
    shared_reading,
)


def test_ceilings_and_what_theorem_1_grants_stay_within_t():
    assert ceiling(100, 2, 30) == 60 and ceiling(50, 2, 30) == 50
    assert at_ceiling(60, 100, 2, 30) and not at_ceiling(59, 100, 2, 30)
    assert granted(800, 4, 197) == 785 and granted(800, 5, 197) == 800  # 981 > T
    assert all(granted(400, h, 257) <= 400 for h in range(1, 9))


def test_a_rank_at_a_ceiling_says_nothing_about_the_embeddings():
    assert own_reading(60, 60, 100, 2, 30) == AT_CEILING  # H·d
    assert own_reading(50, 50, 50, 2, 30) == AT_CEILING  # T
    assert own_reading(40, 50, 50, 2, 30) == AT_CEILING  # the count reaches T
    # shared: at T although H(n−1)+1 lies above it, never "tight"
    assert shared_reading(400, 400, 400, 4, 257, 384) == AT_CEILING
    assert AT_CEILING == "at the ceiling: says nothing about the embeddings"


def test_tight_only_at_h_n_minus_1_plus_1_below_both_ceilings_with_a_gap():
    assert shared_reading(127, 127, 800, 2, 64, 768) == (
        "reaches H(n−1)+1 = 127 below both ceilings, resolved: Theorem 1's bound is tight on "
        "these embeddings"
    )
    # the count reaches the bound but without a decade of gap: a range, not tight
    loose = shared_reading(1, 127, 800, 2, 64, 768)
    assert loose == (
        "1–127 over the resolvable thresholds, below min(T, H(n−1)+1) = 127: not a single number"
    )
    # H(n−1)+1 = 981 > T = 800: reaching T is the ceiling, below it a measurement at most
    assert "tight" not in shared_reading(782, 782, 800, 5, 197, 768)


def test_a_resolved_rank_below_the_bound_measures_the_embeddings():
    assert shared_reading(48, 48, 800, 1, 64, 576) == (
        "48 below min(T, H(n−1)+1) = 64, resolved: a measurement of the embeddings"
    )
    assert own_reading(767, 767, 800, 1, 768) == (
        "767 below its ceiling min(T, H·d) = 768, resolved: a measurement of the embeddings"
    )


def test_no_gap_above_the_floor_is_not_resolved_never_a_measurement():
    reading = shared_reading(0, 376, 800, 2, 197, 768)
    assert reading == NOT_RESOLVED and "measurement" not in reading
    assert own_reading(0, 700, 800, 1, 768) == NOT_RESOLVED


def test_rank_and_gap_texts():
    assert rank_text(12, 12) == "12" and rank_text(3, 12) == "3–12"
    assert rank_text(0, 12) == "≤ 12 (not resolved)"
    assert gap_text(1.2756e-7, 1.2214e-7, 2.4e-7) == (
        "1.3e−7 / 1.2e−7 = 1.04× (0.02 decades); floor 2.4e−7: −0.3 / −0.3"
    )
    assert gap_text(1e-3, 0.0, 1e-7) == "1.0e−3 / 0; floor 1.0e−7: +4.0"
    assert gap_text(math.nan, math.nan, math.nan).startswith("— (rank T reached")
