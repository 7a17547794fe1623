"""The two checks of one layer: tables and JSON-able records (no I/O).

Per layer: a Kruskal profile table (P(k) for every k, with confidence bounds) and a
per-context rank table, with their summaries (kruskal.json, context_rank.json).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
import pandas as pd

from memcap.assumptions import mechanisms
from memcap.assumptions.settings import AssumptionsSettings
from memcap.numerics import (
    BAND_DECADES,
    ContextRanks,
    KruskalBand,
    KruskalProfile,
    Outcome,
    margin_outcome,
    rank_histogram,
)

# Fewer random orderings than this cannot support "applies" (3/S would exceed 10%).
MIN_SUBSETS = 30


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


def kruskal_record(
    band: KruskalBand, raw: KruskalProfile, n: int, level: float = 0.95
) -> dict[str, Any]:
    """JSON-able summary of a profile band at the context size n and at d (general position),
    with paper A's raw rule (``raw``) beside it."""
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


def context_outcomes(ranks: ContextRanks) -> list[Outcome]:
    """Per context: applies (σ_min a decade above the tolerance), does not apply (a decade
    below, or a repeated or zero row, or n > d) or too close to call."""
    margins = ranks.margin_decades
    proved = _proved(ranks)
    return [margin_outcome(float(m), bool(p)) for m, p in zip(margins, proved, strict=True)]


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


def context_table(ranks: ContextRanks, outcomes: list[Outcome] | None = None) -> pd.DataFrame:
    """One row per example: rank, σ_min, σ_max, tolerance, margin (decades), full_rank, then
    the outcome, the exact proofs and paper A's raw rank beside them."""
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
    table["outcome"] = [o.value for o in outcomes or context_outcomes(ranks)]
    for name in ("repeated_rows", "zero_rows"):
        if getattr(ranks, name) is not None:
            table[name] = getattr(ranks, name)
    if ranks.raw is not None:
        table["paper_a_rank"] = ranks.raw.rank
        table["paper_a_margin_decades"] = ranks.raw.margin_decades
    return table


def context_record(ranks: ContextRanks, outcomes: list[Outcome] | None = None) -> dict[str, Any]:
    """JSON-able summary of the context ranks of one model × layer."""
    outcomes = outcomes if outcomes is not None else context_outcomes(ranks)
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
    }
    if ranks.raw is not None:
        raw_margins = ranks.raw.margin_decades
        record["paper_a"] = {
            "full_rank_frac": float(ranks.raw.full_rank.mean()) if ranks.rank.size else math.nan,
            "worst_margin": _finite(raw_margins.min()) if raw_margins.size else None,
        }
    return record


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


@dataclass(frozen=True)
class LayerChecks:
    """Both checks of one layer: the tables and the JSON-able records.

    ``failures`` has one row per failing example (example, check, mechanism, input);
    ``kruskal["applies_examples"]`` is the largest subset found on which both assumptions
    apply, and ``kruskal["subset"]`` says how it was found.
    """

    context_table: pd.DataFrame
    context: dict[str, Any]
    profile_table: pd.DataFrame
    kruskal: dict[str, Any]
    failures: pd.DataFrame


def check_layer(
    queries: np.ndarray,
    ranks: ContextRanks,
    n: int,
    settings: AssumptionsSettings,
    samples: int,
    device: Any,
    workers: int = 1,
    progress: bool = False,
    extraction: Mapping[str, Any] | None = None,
    layer: str = "",
) -> LayerChecks:
    """Assumption 2 from the context ranks the extraction streamed, Assumption 1 and general
    position from ``samples`` random orderings of the queries (at the tolerance and a decade
    either side, and by paper A's raw rule), and why each failing example fails."""
    extraction = extraction or {}
    ranks = settings.deciding(ranks)
    decide = (n, queries.shape[1])
    band = settings.band(queries, samples, device, workers, progress=progress, decide=decide)
    raw = (
        band.profile
        if settings.scaling == "none"
        else settings.raw(queries, samples, device, workers)
    )
    outcomes = context_outcomes(ranks)
    found = mechanisms.failures(queries, ranks, outcomes, extraction, layer)
    kruskal = kruskal_record(band, raw, n, settings.confidence)
    kruskal |= applicable_subset(
        queries, band, outcomes, found, n, settings, samples, device, workers
    )
    kruskal["failure_mechanisms"] = mechanisms.mechanism_counts(found)
    kruskal["structural"] = _structural(queries, extraction, layer)
    if _rules_disagree(kruskal, ranks):
        kruskal["ill_conditioning"] = mechanisms.ill_conditioning(queries)
    table = profile_table(band.profile, settings.confidence)
    for name, other in (("p_strict", band.strict), ("p_loose", band.loose), ("p_paper_a", raw)):
        table[name] = other.p[1 : len(table) + 1]
    return LayerChecks(
        context_table=context_table(ranks, outcomes),
        context=context_record(ranks, outcomes),
        profile_table=table,
        kruskal=kruskal,
        failures=pd.DataFrame(
            [asdict(f) for f in found], columns=[f.name for f in fields(mechanisms.Failure)]
        ),
    )


def _rules_disagree(kruskal: Mapping[str, Any], ranks: ContextRanks) -> bool:
    """Whether paper A's raw rule decides otherwise than ours: P(n) or P(d) on the queries,
    or the full-rank fraction of the contexts."""
    raw = kruskal["paper_a"]
    queries = any(
        not (math.isnan(raw[key]) and math.isnan(kruskal[key])) and raw[key] != kruskal[key]
        for key in ("p_n", "p_d")
    )
    contexts = ranks.raw is not None and bool((ranks.raw.full_rank != ranks.full_rank).any())
    return queries or contexts


def _structural(queries: np.ndarray, extraction: Mapping[str, Any], layer: str) -> str:
    """Why a check of this layer cannot hold by construction for the architecture ("" if not)."""
    reasons = []
    why = mechanisms.structural(extraction, layer)
    if why:
        reasons.append(f"Assumption 2: {why}")
    if mechanisms.all_queries_identical(queries):
        reasons.append(
            f"Assumption 1: the query is the same vector for every input at layer {layer}"
        )
    return "; ".join(reasons)


def applicable_subset(
    queries: np.ndarray,
    band: KruskalBand,
    outcomes: list[Outcome],
    found: list[mechanisms.Failure],
    n: int,
    settings: AssumptionsSettings,
    samples: int,
    device: Any,
    workers: int,
) -> dict[str, Any]:
    """The largest subset found on which both assumptions apply: the examples whose context
    applies, less repeated and zero queries; its Kruskal band re-checked when the whole set's
    does not apply. A subset of Kruskal rank ≥ n keeps it in any subset of itself."""
    dropped = {f.example for f in found}
    keep = np.array([i for i in range(len(outcomes)) if i not in dropped], dtype=np.int64)
    k = min(n, len(keep))
    if k == 0:
        return {"applies_examples": 0, "subset": "no example's context applies"}
    if band.outcome(n, MIN_SUBSETS) is Outcome.APPLIES:
        holds, how = True, "the whole set's Kruskal band applies"
    elif len(keep) == len(queries):
        holds, how = False, "no example to drop: Assumption 1 fails on the set itself"
    else:
        sub = settings.band(queries[keep], samples, device, workers, decide=(k,))
        outcome = sub.outcome(k, MIN_SUBSETS) or Outcome.NOT_TESTED
        holds = outcome is Outcome.APPLIES
        how = f"Kruskal band re-checked on the {len(keep)} examples left: {outcome.value}"
    return {"applies_examples": int(len(keep)) if holds else 0, "subset": how}
