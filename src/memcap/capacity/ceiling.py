"""What a rank of Z says, in words: at a ceiling, tight, a measurement, or not one number.

rank(Z) of a T × H·d matrix cannot exceed min(T, H·d) whatever the embeddings are, so a rank at
that ceiling reports the sizes; only a rank below it can measure the embeddings. With one context
shared by every example the rank cannot exceed H(n−1)+1 either: reaching it below both ceilings
shows Theorem 1's bound tight on these embeddings. A shared context with only m < n distinct rows
fails Assumption 2 (rank < n) and caps the rank lower still: every head's output is a convex
combination of its m distinct rows, so rank(Z) ≤ H(m−1)+1. Either claim needs a *resolved* rank
(:mod:`memcap.capacity.spectrum`): a decade of gap at the floor the inputs' error sets. An
unresolved rank is a range (``rank_low``–``rank_high``), or not resolved at all. No torch
import: the report reads the capacity tables with these functions.
"""

from __future__ import annotations

import math

AT_CEILING = "at the ceiling: says nothing about the embeddings"
NOT_RESOLVED = "not resolved at float32: no decade gap above the floor"


def ceiling(examples: int, heads: int, d: int) -> int:
    """The largest rank a T × H·d matrix Z can have: min(T, H·d)."""
    return min(examples, heads * d)


def at_ceiling(certified: int, examples: int, heads: int, d: int) -> bool:
    """Whether the certified capacity equals its ceiling min(T, H·d)."""
    return certified >= ceiling(examples, heads, d)


def granted(examples: int, heads: int, n: int) -> int:
    """What Theorem 1 grants on T examples: min(T, H(n−1)+1)."""
    return min(examples, heads * (n - 1) + 1)


def rank_text(rank_low: int, rank_high: int) -> str:
    """A rank as one number when resolved, else its range over the resolvable thresholds."""
    if rank_low == rank_high and rank_high > 0:
        return str(rank_high)
    if rank_low > 0:
        return f"{rank_low}–{rank_high}"
    return f"≤ {rank_high} (not resolved)"


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


def own_reading(rank_low: int, rank_high: int, examples: int, heads: int, d: int) -> str:
    """One own-context row in words: at its ceiling min(T, H·d), a measurement, or a range."""
    top = ceiling(examples, heads, d)
    if rank_high >= top:
        return AT_CEILING
    return _below(rank_low, rank_high, f"its ceiling min(T, H·d) = {top}")


def shared_reading(rank_low: int, rank_high: int, examples: int, heads: int, n: int,
                   d: int, distinct: int | None = None,
                   cause: str | None = None) -> str:  # fmt: skip
    """One shared-context row in words: at a ceiling, Theorem 1's bound tight, or below it;
    led by what repeated rows imply where the shared context has ``distinct`` < n rows
    (``cause``: why it repeats them, e.g. positions that enter inside attention)."""
    reading = _shared(rank_low, rank_high, examples, heads, n, d)
    if distinct is None or not 0 < distinct < n:
        return reading
    why = f" ({cause})" if cause else ""
    return (
        f"the shared context has {distinct} distinct rows of n = {n}{why}: Assumption 2 fails "
        f"on it, and rank(Z) ≤ H(m−1)+1 = {repeated_bound(examples, heads, distinct)} with m = "
        f"{distinct}, whatever the attention. {reading}"
    )


def repeated_bound(examples: int, heads: int, distinct: int) -> int:
    """The largest rank of Z with one shared context of m distinct rows: min(T, H(m−1)+1)."""
    return granted(examples, heads, distinct)


def _shared(rank_low: int, rank_high: int, examples: int, heads: int, n: int, d: int) -> str:
    if rank_high >= ceiling(examples, heads, d):
        return AT_CEILING
    bound = heads * (n - 1) + 1
    if rank_low == rank_high == bound:
        return (
            f"reaches H(n−1)+1 = {bound} below both ceilings, resolved: Theorem 1's bound is "
            "tight on these embeddings"
        )
    return _below(rank_low, rank_high, f"min(T, H(n−1)+1) = {granted(examples, heads, n)}")


def _below(rank_low: int, rank_high: int, top: str) -> str:
    if rank_low == rank_high > 0:
        return f"{rank_high} below {top}, resolved: a measurement of the embeddings"
    if rank_low > 0:
        return (
            f"{rank_low}–{rank_high} over the resolvable thresholds, below {top}: not a single "
            "number"
        )
    return NOT_RESOLVED


def _decades(ratio: float) -> str:
    return f"{math.log10(ratio):+.1f}".replace("-", "−")


def _sci(value: float) -> str:
    """1.2e−7: a Unicode minus, so a table cell does not break the number at its hyphen."""
    mantissa, exponent = f"{value:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}".replace("-", "−")
