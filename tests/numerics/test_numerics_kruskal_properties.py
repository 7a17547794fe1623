"""Property-based: the Kruskal profile against exhaustive enumeration of all subsets (T ≤ 10)."""

from itertools import combinations

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from memcap.numerics import balance, kruskal_profile

SAMPLES = 3000


def independent(rows: np.ndarray, rtol: float) -> bool:
    s = np.linalg.svd(np.asarray(rows, dtype=np.float64), compute_uv=False)
    return len(s) == len(rows) and s[0] > 0 and s[-1] > rtol * s[0]


def exhaustive(x: np.ndarray, rtol: float) -> tuple[int, list[float]]:
    """Kruskal rank and the exact fraction of independent k-subsets, k = 1 … min(T, d)."""
    t, d = x.shape
    fractions = []
    for k in range(1, min(t, d) + 1):
        subsets = list(combinations(range(t), k))
        fractions.append(np.mean([independent(x[list(s)], rtol) for s in subsets]))
    kruskal = next((k for k, f in enumerate(fractions) if f < 1), len(fractions))
    return kruskal, fractions


@st.composite
def structured_sets(draw, dims, dtype):
    """Up to 10 vectors: small integer combinations of a random basis of random rank, so the
    set has exact dependencies (and duplicates, zero vectors) of every size."""
    t = draw(st.integers(2, 10))
    d = draw(st.sampled_from(dims))
    rank = draw(st.integers(1, min(t, d)))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    basis = rng.standard_normal((rank, d)) * draw(st.sampled_from([1e-3, 1.0, 1e3]))
    coefficients = np.array(
        draw(
            st.lists(
                st.lists(st.integers(-2, 2), min_size=rank, max_size=rank), min_size=t, max_size=t
            )
        )  # fmt: skip
    )
    return (coefficients @ basis).astype(dtype)


def check_against_enumeration(x: np.ndarray, rtol: float | None) -> None:
    """Paper A's rule (the stored values) and the default (the set equilibrated), each against
    an enumeration on the values it decides on."""
    balanced = balance(torch.from_numpy(x)).values.numpy()
    for scaling, values in (("none", x), ("equilibrate", balanced)):
        profile = kruskal_profile(x, SAMPLES, seed=0, rtol=rtol, scaling=scaling)
        kruskal, fractions = exhaustive(values, profile.rtol)
        assert profile.lower_bound <= kruskal <= profile.upper_bound, scaling
        # Every k-subset of T ≤ 10 vectors is one of ≤ 252: 3000 orderings miss a dependent
        # one with probability below (1 − 1/252)^3000 < 1e-5.
        assert profile.estimate == kruskal, scaling
        for k, fraction in enumerate(fractions, start=1):
            if fraction in (0.0, 1.0):
                assert profile.p[k] == fraction, (scaling, k)
            else:
                bound = 5 * np.sqrt(fraction * (1 - fraction) / SAMPLES)
                assert abs(profile.p[k] - fraction) <= bound, (scaling, k)


@settings(max_examples=15, deadline=None)
@given(structured_sets(dims=[3, 5], dtype=np.float64))
def test_float64_profile_matches_enumeration(x):
    # A tolerance far above float64 rounding: exact dependencies are unambiguous.
    check_against_enumeration(x, rtol=1e-9)


@settings(max_examples=15, deadline=None)
@given(structured_sets(dims=[16, 20], dtype=np.float32))
def test_float32_profile_matches_enumeration(x):
    # The matrix_rank rule for float32 storage; d ≥ 16 takes the shifted-Cholesky route.
    check_against_enumeration(x, rtol=None)
