"""What a rank of Z says, in words: at a ceiling, at its most, a measurement, or a range.

The exact rank of Z lies between two numbers. From below, the count of singular values above
the floor the measured error sets (``certified``, ``rank_high``): by Weyl's inequality the error
cannot produce them. From above, Z's shape: rank(Z) of a T × H·d matrix cannot exceed
min(T, H·d) whatever the embeddings are, and with one context shared by every example it cannot
exceed H(n−1)+1 either, H(m−1)+1 where only m < n of its rows are distinct (every head's output
is then a convex combination of m rows; Assumption 2 fails). Where the two meet the rank is that
number, certified: at min(T, H·d) it reports the sizes, at H(n−1)+1 it is fixed attention's most
on one shared context. Below both, a *resolved* rank (:mod:`memcap.capacity.spectrum`: a decade
of gap at the floor) is a measurement of the embeddings; an unresolved one is the range from the
certified count up to the cap. None of this is a trained capacity: fixed attention's rank says
what Theorem 1's construction reaches, not what training memorizes (docs/real_memorization.md).
No torch import: the report reads the capacity tables with these functions.
"""

from __future__ import annotations

import math

AT_CEILING = "at the ceiling: says nothing about the embeddings"
NOT_RESOLVED = "not resolved at float32: no decade gap above the floor"


def ceiling(T: int, H: int, d: int) -> int:
    """The largest rank a T × H·d matrix Z can have: min(T, H·d)."""
    return min(T, H * d)


def at_ceiling(certified: int, T: int, H: int, d: int) -> bool:
    """Whether the certified capacity equals its ceiling min(T, H·d)."""
    return certified >= ceiling(T, H, d)


def granted(T: int, H: int, n: int) -> int:
    """What Theorem 1 grants on T examples: min(T, H(n−1)+1)."""
    return min(T, H * (n - 1) + 1)


def rank_text(certified: int, cap: int, resolved: bool = False) -> str:
    """The exact rank from the certified count up to the most Z's shape allows: one number
    where they meet, or where the count is ``resolved`` (a decade gap above it at the floor)."""
    if certified >= cap:
        return str(cap)
    if resolved and certified > 0:
        return str(certified)
    return f"{certified}–{cap}"


def shared_cap(T: int, H: int, n: int, d: int, distinct: int | None = None) -> int:
    """The most rank one shared context allows: min(T, H·d, H(n−1)+1), with m = ``distinct``
    in place of n where fewer of its rows are distinct."""
    m = distinct if distinct is not None and 0 < distinct < n else n
    return min(ceiling(T, H, d), granted(T, H, m))


def gap_text(last_kept: float, first_dropped: float, floor: float) -> str:
    """The rank's edge: last kept / first dropped σ (relative to σ_max) as a ratio and in
    decades, then both in decades above the floor the inputs' error sets (− below it)."""
    if math.isnan(last_kept) or math.isnan(floor):
        return "— (rank T reached at a smaller H)"
    if first_dropped <= 0:
        return f"{_sci(last_kept)} / 0; floor {_sci(floor)}: {_decades(last_kept / floor)}"
    ratio = last_kept / first_dropped
    return (
        f"{_sci(last_kept)} / {_sci(first_dropped)} = {ratio:.3g}× ({math.log10(ratio):.2f} "
        f"decades); floor {_sci(floor)}: {_decades(last_kept / floor)} / "
        f"{_decades(first_dropped / floor)}"
    )


def own_reading(rank_low: int, rank_high: int, T: int, H: int, d: int) -> str:
    """One own-context row in words: at its ceiling min(T, H·d), a measurement, or a range."""
    top = ceiling(T, H, d)
    if rank_high >= top:
        return AT_CEILING
    return _below(rank_low, rank_high, f"its ceiling min(T, H·d) = {top}")


def shared_reading(rank_low: int, rank_high: int, T: int, H: int, n: int,
                   d: int, distinct: int | None = None,
                   cause: str | None = None) -> str:  # fmt: skip
    """One shared-context row in words: at a ceiling, at H(n−1)+1, or below them;
    led by what repeated rows imply where the shared context has ``distinct`` < n rows
    (``cause``: why it repeats them, e.g. positions that enter inside attention)."""
    reading = _shared(rank_low, rank_high, T, H, n, d)
    if distinct is None or not 0 < distinct < n:
        return reading
    why = f" ({cause})" if cause else ""
    return (
        f"the shared context has {distinct} distinct rows of n = {n}{why}: Assumption 2 fails "
        f"on it, and rank(Z) ≤ H(m−1)+1 = {repeated_bound(T, H, distinct)} with m = "
        f"{distinct}, whatever the attention. {reading}"
    )


def repeated_bound(T: int, H: int, distinct: int) -> int:
    """The largest rank of Z with one shared context of m distinct rows: min(T, H(m−1)+1)."""
    return granted(T, H, distinct)


def _shared(rank_low: int, rank_high: int, T: int, H: int, n: int, d: int) -> str:
    if rank_high >= ceiling(T, H, d):
        return AT_CEILING
    bound = H * (n - 1) + 1
    if rank_high >= bound:
        return (
            f"= H(n−1)+1 = {bound} below both ceilings, certified: fixed attention's most on "
            "one shared context (not a trained capacity)"
        )
    return _below(rank_low, rank_high, f"min(T, H(n−1)+1) = {granted(T, H, n)}")


def _below(rank_low: int, rank_high: int, top: str) -> str:
    if rank_low == rank_high > 0:
        return f"{rank_high} below {top}, resolved: a measurement of the embeddings"
    if rank_low > 0:
        return (
            f"≥ {rank_high} certified, at most {top}: not a single number (no decade gap at the "
            f"floor; the counts fall to {rank_low} at the first gap above it)"
        )
    return f"≥ {rank_high} certified, at most {top}: {NOT_RESOLVED}"


def _decades(ratio: float) -> str:
    return f"{math.log10(ratio):+.1f}".replace("-", "−")


def _sci(value: float) -> str:
    """1.2e−7: a Unicode minus, so a table cell does not break the number at its hyphen."""
    mantissa, exponent = f"{value:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}".replace("-", "−")
