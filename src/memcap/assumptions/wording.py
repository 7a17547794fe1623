"""The stage's numbers in words, for the checks' evidence: the zero lines of the measured error
(:mod:`memcap.numerics.error`) and the Kruskal rank at τ and at the measured error."""

from __future__ import annotations

import math

from memcap.assumptions.evidence import LayerEvidence
from memcap.numerics.error import CLEAR_DECADES, ERROR_FACTOR


def _missing(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def error_words(relative: float | None, what: str) -> str:
    """A context's zero line in words ("" when not known): ERROR_FACTOR·δ (concentration 1)."""
    if _missing(relative):
        return ""
    return f"zero line {ERROR_FACTOR:g} × {relative:.1e} (measured {what} error)"


def query_words(ev: LayerEvidence) -> tuple[str, str]:
    """(the Kruskal rank at τ and, as sampled estimates, at the measured error; the queries'
    zero line ERROR_FACTOR·max(δ/c, δ_aligned), c a subset's concentration), in words."""
    clear = ("a decade" if CLEAR_DECADES == 1 else f"{CLEAR_DECADES:g} decades") + " clear of it"
    pairs = ((ev.error_estimate, "independent within it"), (ev.error_estimate_clear, clear))
    at = [f"{value} {what}" for value, what in pairs if value is not None]
    tau = (
        ""
        if ev.kruskal_rank_estimate is None
        else f"Kruskal rank at τ ≈ {ev.kruskal_rank_estimate}"
    )
    estimate = "; ".join(
        w
        for w in (tau, at and f"Kruskal rank at the measured error, sampled: {', '.join(at)}")
        if w
    )
    if _missing(ev.query_error):
        return estimate, ""
    shared = (
        "" if _missing(ev.query_error_aligned) else f", δ_aligned = {ev.query_error_aligned:.1e}"
    )
    return estimate, (
        f"zero line {ERROR_FACTOR:g}·max(δ/c, δ_aligned) with δ = {ev.query_error:.1e}{shared} "
        "(measured query error; c: a subset's σ_max over its largest row norm)"
    )
