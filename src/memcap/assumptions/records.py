"""The records and tables of one layer's checks: P(k), per-context ranks, their JSON summaries.

Pure functions of the numerics' results (no I/O): :mod:`memcap.assumptions.checks` calls them
and the check job writes what they return (kruskal_profile.csv, kruskal.json,
context_rank.csv, context_rank.json).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from memcap.assumptions.evidence import MIN_SUBSETS
from memcap.numerics import (
    BAND_DECADES,
    ContextRanks,
    KruskalBand,
    KruskalProfile,
    Outcome,
    margin_outcome,
    rank_histogram,
)
from memcap.numerics.error import CLEAR_DECADES, ErrorScale


def profile_table(profile: KruskalProfile, level: float = 0.95) -> pd.DataFrame:
    """P(k) for k = 1 … min(T, d), with Clopper–Pearson bounds and the dependent-fraction bound.

    Columns: k, p_full_rank, independent, samples, p_low, p_high (two-sided, ``level``),
    dependent_bound (one-sided upper bound on the fraction of dependent k-subsets).
    """
    ks = np.arange(1, profile.p.size)
    rows = []
    for k in ks:
        low, high = profile.interval(int(k), level)
        rows.append(
            {
                "k": int(k),
                "p_full_rank": float(profile.p[k]),
                "independent": profile.independent_count(int(k)),
                "samples": profile.samples,
                "p_low": low,
                "p_high": high,
                "dependent_bound": profile.dependent_fraction_bound(int(k), level),
            }
        )
    return pd.DataFrame(rows)


def _p_at(profile: KruskalProfile, k: int) -> float:
    """P(k); 0 when k > d (k vectors in R^d are dependent), NaN when k > T (no k-subset)."""
    if k > profile.T:
        return math.nan
    if k > profile.d:
        return 0.0
    return float(profile.p[k])


def _outcome(band: KruskalBand, k: int) -> str:
    outcome = band.outcome(k, MIN_SUBSETS)
    return (outcome or Outcome.NOT_TESTED).value


def _tau_outcome(band: KruskalBand, k: int) -> str:
    outcome = band.tau_outcome(k, MIN_SUBSETS)
    return (outcome or Outcome.NOT_TESTED).value


def _decision(band: KruskalBand, k: int) -> dict[str, Any] | None:
    decided = band.decision(k)
    return None if decided is None else decided.record()


def _error_record(error: ErrorScale | None) -> dict[str, Any] | None:
    if error is None:
        return None
    return {
        "relative": error.relative,
        "aligned": error.aligned,
        "source": error.source,
        "zero_line": error.zero_line,
        "clear_line": error.clear_line,
    }


def error_estimate(profiles: Sequence[tuple[float, int]], line: float, cap: int) -> int | None:
    """The Kruskal rank estimate at a line of the measured error's scale (σ_min/σ_max): the
    largest k at which every sampled k-subset lies above ``line``, as far as the profiles show.

    A profile at tolerance r ≥ ``line`` whose estimate is e has every sampled k-subset, k ≤ e,
    above r, so above the line: the largest such e is a lower bound on the estimate at the
    line, capped by the exact proofs' bound ``cap``. None where no profile's tolerance reaches
    the line (the profiles do not resolve it).

    Args:
        profiles: (tolerance, estimate) of each profile on the same orderings.
        line: the line, e.g. the zero line of a set of concentration 1 (the highest).
        cap: the Kruskal rank bound the proofs give.
    """
    known = [estimate for tolerance, estimate in profiles if tolerance >= line]
    return min(max(known), cap) if known else None


def error_estimates(band: KruskalBand) -> dict[str, Any] | None:
    """The band's Kruskal rank estimates on the measured error's scale: every sampled subset
    independent within the error (above the zero line) and a decade clear of it, read at the
    lines of concentration 1 (the highest: a set's own lines lie at or below them)."""
    if band.error is None:
        return None
    zero = float(band.error.zero_lines(1.0))
    clear = zero * 10.0**CLEAR_DECADES
    profiles = [(p.rtol, p.estimate) for p in (band.profile, band.strict, band.loose)]
    return {
        "zero_line": zero,
        "clear_line": clear,
        "independent": error_estimate(profiles, zero, band.certified_upper),
        "clear": error_estimate(profiles, clear, band.certified_upper),
    }


def kruskal_record(
    band: KruskalBand, raw: KruskalProfile, n: int, level: float = 0.95
) -> dict[str, Any]:
    """JSON-able summary of a profile band at the context size n and at d (general position):
    the decisions against the measured error, the null and the proofs, P(k) at τ and a decade
    either side (today's rule, ``tau_outcome_*``), paper A's raw rule (``raw``) beside it."""
    profile = band.profile
    record: dict[str, Any] = {
        "T": profile.T,
        "d": profile.d,
        "n": n,
        "samples": profile.samples,
        "rtol": profile.rtol,
        "scaling": profile.scaling,
        "route": profile.route,
        "confidence_level": level,
        "p_n": _p_at(profile, n),
        "p_d": _p_at(profile, profile.d),
        "estimate": profile.estimate,
        "upper_bound": profile.upper_bound,
        "lower_bound": profile.lower_bound,
        "spectral_cap": profile.spectral_cap,
        "seconds": profile.seconds + band.strict.seconds + band.loose.seconds,
        "outcome_n": _outcome(band, n),
        "outcome_d": _outcome(band, profile.d),
        "tau_outcome_n": _tau_outcome(band, n),
        "tau_outcome_d": _tau_outcome(band, profile.d),
        "error": _error_record(band.error),
        "error_estimate": error_estimates(band),
        "decisions": {key: _decision(band, k) for key, k in (("n", n), ("d", profile.d))},
        "certified_upper": band.certified_upper,
        "proofs": [p.__dict__ | {"indices": list(p.indices)} for p in band.proofs],
        "circuits": [
            {
                "size": c.size,
                "indices": list(c.indices),
                "ratio": c.ratio,
                "zero_line": c.zero_line,
                "minimal": c.minimal,
            }
            for c in band.circuits
        ],  # fmt: skip
        "band": {
            "decades": BAND_DECADES,
            "rtol_strict": band.strict.rtol,
            "rtol_loose": band.loose.rtol,
            "p_n_strict": _p_at(band.strict, n),
            "p_n_loose": _p_at(band.loose, n),
            "p_d_strict": _p_at(band.strict, profile.d),
            "p_d_loose": _p_at(band.loose, profile.d),
            "estimate_strict": band.strict.estimate,
            "estimate_loose": band.loose.estimate,
            "upper_bound_loose": band.loose.upper_bound,
        },
        "paper_a": {
            "scaling": raw.scaling,
            "rtol": raw.rtol,
            "p_n": _p_at(raw, n),
            "p_d": _p_at(raw, raw.d),
            "estimate": raw.estimate,
            "upper_bound": raw.upper_bound,
        },
        "pairs": {
            "zero_rows": profile.pairs.zero_rows,
            "duplicate_pairs": profile.pairs.duplicate_pairs,
            "dependent_pairs": profile.pairs.dependent_pairs,
            "near_duplicate_pairs": profile.pairs.near_duplicate_pairs,
            "example": list(profile.pairs.example) if profile.pairs.example else None,
        },
        "certificates": [
            {"kind": c.kind, "size": c.size, "indices": list(c.indices), "verified": c.verified}
            for c in profile.certificates
        ],
    }
    for key, k in (("n", n), ("d", profile.d)):
        if k <= min(profile.T, profile.d):
            record[f"p_{key}_interval"] = list(profile.interval(k, level))
            record[f"dependent_bound_{key}"] = profile.dependent_fraction_bound(k, level)
    return record


def context_outcomes(ranks: ContextRanks, error: ErrorScale | None = None) -> list[Outcome]:
    """Per context: applies (σ_min/σ_max a decade clear of the measured error's zero line),
    does not apply (at or under it, or a repeated or zero row, or n > d) or too close to call.
    Without an error scale: the band of a decade either side of the tolerance (today's rule)."""
    proved = _proved(ranks)
    if error is None:
        margins = ranks.margin_decades
        return [margin_outcome(float(m), bool(p)) for m, p in zip(margins, proved, strict=True)]
    return [
        _error_outcome(float(m), bool(p))
        for m, p in zip(error_margins(ranks, error), proved, strict=True)
    ]


def error_margins(ranks: ContextRanks, error: ErrorScale) -> np.ndarray:
    """log10(σ_min/σ_max ÷ zero line) of each context: ≤ 0 dependent within the error."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(ranks.sigma_max > 0, ranks.sigma_min / ranks.sigma_max, 0.0)
    return np.asarray(error.margin(ratio), dtype=float)


def _error_outcome(margin: float, proved: bool) -> Outcome:
    if proved or margin <= 0:
        return Outcome.DOES_NOT_APPLY
    return Outcome.APPLIES if margin >= CLEAR_DECADES else Outcome.TOO_CLOSE


def _proved(ranks: ContextRanks) -> np.ndarray:
    """Contexts proved rank-deficient exactly: a repeated or zero row, or n > d."""
    proved = np.full(ranks.rank.size, ranks.n > ranks.d)
    for counts in (ranks.repeated_rows, ranks.zero_rows):
        if counts is not None:
            proved |= counts > 0
    return proved


def overall(outcomes: list[Outcome]) -> Outcome:
    """One check's outcome over its examples: the worst of them."""
    for worst in (Outcome.DOES_NOT_APPLY, Outcome.TOO_CLOSE, Outcome.APPLIES):
        if worst in outcomes:
            return worst
    return Outcome.NOT_TESTED


def context_table(
    ranks: ContextRanks, outcomes: list[Outcome] | None = None, error: ErrorScale | None = None
) -> pd.DataFrame:
    """One row per example: rank, σ_min, σ_max, tolerance, margin (decades), full_rank, then
    the outcome, the margin above the measured error's zero line, the exact proofs and paper
    A's raw rank beside them."""
    table = pd.DataFrame(
        {
            "example": np.arange(ranks.rank.size),
            "rank": ranks.rank,
            "sigma_min": ranks.sigma_min,
            "sigma_max": ranks.sigma_max,
            "tolerance": ranks.tolerance,
            "margin_decades": ranks.margin_decades,
            "full_rank": ranks.full_rank,
        }
    )
    table["outcome"] = [o.value for o in outcomes or context_outcomes(ranks, error)]
    if error is not None:
        table["error_margin_decades"] = error_margins(ranks, error)
    for name in ("repeated_rows", "zero_rows"):
        if getattr(ranks, name) is not None:
            table[name] = getattr(ranks, name)
    if ranks.raw is not None:
        table["paper_a_rank"] = ranks.raw.rank
        table["paper_a_margin_decades"] = ranks.raw.margin_decades
    return table


def context_record(
    ranks: ContextRanks, outcomes: list[Outcome] | None = None, error: ErrorScale | None = None
) -> dict[str, Any]:
    """JSON-able summary of the context ranks of one model × layer."""
    outcomes = outcomes if outcomes is not None else context_outcomes(ranks, error)
    margins = ranks.margin_decades
    worst = int(np.argmin(margins)) if margins.size else None
    finite = margins[np.isfinite(margins)]
    record = {
        "contexts_checked": int(ranks.rank.size),
        "n": ranks.n,
        "d": ranks.d,
        "rtol": ranks.rtol,
        "scaling": ranks.scaling,
        "full_rank_frac": float(ranks.full_rank.mean()) if ranks.rank.size else math.nan,
        "rank_min": int(ranks.rank.min()) if ranks.rank.size else None,
        "rank_histogram": {str(k): v for k, v in rank_histogram(ranks).items()},
        "worst_margin": _finite(margins[worst]) if worst is not None else None,
        "median_margin": float(np.median(finite)) if finite.size else None,
        "worst_example": worst,
        "svd_checked": ranks.svd_checked,
        "outcome": overall(outcomes).value,
        "outcome_counts": {o.value: outcomes.count(o) for o in Outcome if o in outcomes},
        "proved_deficient": int(_proved(ranks).sum()),
        "tau_outcome": overall(context_outcomes(ranks)).value,
    }
    if error is not None:
        above = error_margins(ranks, error)
        finite_above = above[np.isfinite(above)]
        record["error"] = _error_record(error)
        record["worst_error_margin"] = _finite(above.min()) if above.size else None
        record["median_error_margin"] = (
            float(np.median(finite_above)) if finite_above.size else None
        )
    if ranks.raw is not None:
        raw_margins = ranks.raw.margin_decades
        record["paper_a"] = {
            "full_rank_frac": float(ranks.raw.full_rank.mean()) if ranks.rank.size else math.nan,
            "worst_margin": _finite(raw_margins.min()) if raw_margins.size else None,
        }
    return record


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None
