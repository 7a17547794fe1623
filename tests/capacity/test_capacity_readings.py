"""What a rank of Z says in words: at a ceiling, at H(n−1)+1, a measurement, a range from the
certified count up, unresolved."""

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
    shared_cap,
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


def test_h_n_minus_1_plus_1_is_certified_where_the_count_reaches_it_never_tight():
    """A certified count at H(n−1)+1 meets the shared context's cap: the rank is that number
    whatever the gap, and no reading calls fixed attention's rank a tight capacity."""
    exact = (
        "= H(n−1)+1 = 127 below both ceilings, certified: fixed attention's most on one "
        "shared context (not a trained capacity)"
    )
    assert shared_reading(127, 127, 800, 2, 64, 768) == exact
    assert shared_reading(1, 127, 800, 2, 64, 768) == exact  # no decade gap, still squeezed
    # H(n−1)+1 = 981 > T = 800: reaching T is the ceiling, below it a measurement at most
    assert "tight" not in shared_reading(782, 782, 800, 5, 197, 768)
    # below the cap without a gap: from the certified count up, never from 1
    assert shared_reading(1, 120, 800, 2, 64, 768) == (
        "≥ 120 certified, at most min(T, H(n−1)+1) = 127: not a single number (no decade gap "
        "at the floor; the counts fall to 1 at the first gap above it)"
    )


def test_a_resolved_rank_below_the_bound_measures_the_embeddings():
    assert shared_reading(48, 48, 800, 1, 64, 576) == (
        "48 below min(T, H(n−1)+1) = 64, resolved: a measurement of the embeddings"
    )
    assert own_reading(767, 767, 800, 1, 768) == (
        "767 below its ceiling min(T, H·d) = 768, resolved: a measurement of the embeddings"
    )


def test_no_gap_above_the_floor_is_not_resolved_never_a_measurement():
    reading = shared_reading(0, 376, 800, 2, 197, 768)
    assert reading == f"≥ 376 certified, at most min(T, H(n−1)+1) = 393: {NOT_RESOLVED}"
    assert "measurement" not in reading
    assert own_reading(0, 700, 800, 1, 768).endswith(NOT_RESOLVED)


def test_rank_and_gap_texts():
    # BERT layer 1 at H = 6, n = 64, one shared context: 378 certified, at most 379
    assert rank_text(378, shared_cap(800, 6, 64, 768)) == "378–379"
    assert rank_text(379, 379) == "379" and rank_text(0, 12) == "0–12"
    assert rank_text(1, 197, resolved=True) == "1"  # a decade gap above the count: measured
    assert rank_text(0, 12, resolved=True) == "0–12"  # nothing certified, nothing resolved
    assert shared_cap(800, 6, 64, 768, distinct=10) == 55  # H(m−1)+1 with m = 10
    assert shared_cap(100, 6, 64, 10) == 60  # H·d
    assert gap_text(1.2756e-7, 1.2214e-7, 2.4e-7) == (
        "1.3e−7 / 1.2e−7 = 1.04× (0.02 decades); floor 2.4e−7: −0.3 / −0.3"
    )
    assert gap_text(1e-3, 0.0, 1e-7) == "1.0e−3 / 0; floor 1.0e−7: +4.0"
    assert gap_text(math.nan, math.nan, math.nan).startswith("— (rank T reached")
