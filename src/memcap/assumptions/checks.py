"""The two checks of one layer: tables and JSON-able records (no I/O).

Per layer: a Kruskal profile table (P(k) for every k, with confidence bounds) and a
per-context rank table, with their summaries (kruskal.json, context_rank.json).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from memcap.assumptions.settings import AssumptionsSettings
from memcap.numerics import ContextRanks, KruskalProfile, rank_histogram


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


def kruskal_record(profile: KruskalProfile, n: int, level: float = 0.95) -> dict[str, Any]:
    """JSON-able summary of a profile at the context size n and at d (general position)."""
    record: dict[str, Any] = {
        "T": profile.T,
        "d": profile.d,
        "n": n,
        "samples": profile.samples,
        "rtol": profile.rtol,
        "route": profile.route,
        "confidence_level": level,
        "p_n": _p_at(profile, n),
        "p_d": _p_at(profile, profile.d),
        "estimate": profile.estimate,
        "upper_bound": profile.upper_bound,
        "lower_bound": profile.lower_bound,
        "spectral_cap": profile.spectral_cap,
        "seconds": profile.seconds,
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


def context_table(ranks: ContextRanks) -> pd.DataFrame:
    """One row per example: rank, σ_min, σ_max, tolerance, margin (decades), full_rank."""
    return pd.DataFrame(
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


def context_record(ranks: ContextRanks) -> dict[str, Any]:
    """JSON-able summary of the context ranks of one model × layer."""
    margins = ranks.margin_decades
    worst = int(np.argmin(margins)) if margins.size else None
    return {
        "contexts_checked": int(ranks.rank.size),
        "n": ranks.n,
        "d": ranks.d,
        "rtol": ranks.rtol,
        "full_rank_frac": float(ranks.full_rank.mean()) if ranks.rank.size else math.nan,
        "rank_min": int(ranks.rank.min()) if ranks.rank.size else None,
        "rank_histogram": {str(k): v for k, v in rank_histogram(ranks).items()},
        "worst_margin": _finite(margins[worst]) if worst is not None else None,
        "worst_example": worst,
        "svd_checked": ranks.svd_checked,
    }


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


@dataclass(frozen=True)
class LayerChecks:
    """Both checks of one layer: the tables and the JSON-able records."""

    context_table: pd.DataFrame
    context: dict[str, Any]
    profile_table: pd.DataFrame
    kruskal: dict[str, Any]


def check_layer(
    queries: np.ndarray,
    ranks: ContextRanks,
    n: int,
    settings: AssumptionsSettings,
    samples: int,
    device: Any,
    workers: int = 1,
    progress: bool = False,
) -> LayerChecks:
    """Assumption 2 from the context ranks the extraction streamed, Assumption 1 and general
    position from ``samples`` random orderings of the queries."""
    profile = settings.profile(queries, samples, device, workers, progress=progress)
    return LayerChecks(
        context_table=context_table(ranks),
        context=context_record(ranks),
        profile_table=profile_table(profile, settings.confidence),
        kruskal=kruskal_record(profile, n, settings.confidence),
    )
