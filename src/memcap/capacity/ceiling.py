"""What a certified capacity says next to its ceiling min(T, H·d).

rank(Z) of a T × H·d matrix cannot exceed min(T, H·d) whatever the embeddings are, so a rank at
that ceiling reports the sizes; only a rank below it measures the embeddings. With one context
shared by every example the rank cannot exceed min(T, H(n−1)+1) either, which lies below
min(T, H·d) (n ≤ d): reaching it shows Theorem 1's bound tight on these embeddings, falling
short of it measures them. No torch import: the report reads the capacity tables with these
functions.
"""

from __future__ import annotations


def ceiling(examples: int, heads: int, d: int) -> int:
    """The largest rank a T × H·d matrix Z can have: min(T, H·d)."""
    return min(examples, heads * d)


def at_ceiling(certified: int, examples: int, heads: int, d: int) -> bool:
    """Whether the certified capacity equals its ceiling min(T, H·d)."""
    return certified >= ceiling(examples, heads, d)


def ceiling_reading(certified: int, examples: int, heads: int, d: int) -> str:
    """One row's certified capacity in words: a measurement, or which ceiling it sits at."""
    top = ceiling(examples, heads, d)
    if certified < top:
        return f"below its ceiling {top}: a measurement of the embeddings"
    if examples <= heads * d:
        return "at ceiling: needs T > H·d to say more"
    return (
        f"at ceiling: Z has full column rank H·d = {top}, the readout's limit, "
        "not a property of the data"
    )


def shared_reading(certified: int, examples: int, heads: int, n: int) -> str:
    """One shared-context row in words: at Theorem 1's bound min(T, H(n−1)+1), or below it."""
    top = min(examples, heads * (n - 1) + 1)
    if certified >= top:
        return f"reaches min(T, H(n−1)+1) = {top}: the bound is tight on these embeddings"
    return f"below min(T, H(n−1)+1) = {top}: a measurement of the embeddings"
