"""Tables, summary rows and figures of the assumption checks (no I/O, no numerics of note).

Per model × layer: a Kruskal profile table (P(k) for every k, with confidence bounds), a
per-context rank table, their JSON-able summaries, and one row of ``summary.csv``. Figures use
the shared seaborn theme of :mod:`memcap.plotting`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib import pyplot as plt
from matplotlib.ticker import MaxNLocator

from memcap.numerics import ContextRanks, KruskalProfile, kruskal_profile, rank_histogram
from memcap.plotting import set_theme


@dataclasses.dataclass(frozen=True)
class AssumptionsSettings:
    """The ``assumptions`` config section (see the schema for each key)."""

    samples: int = 500  # random orderings S per detail layer
    depth_samples: int = 100  # random orderings S per depth row (profile_depth)
    seed: int = 0  # seed of the orderings
    rtol: float | None = None  # query-subset tolerance; None = max(k, d)·eps
    context_rtol: float | None = None  # context tolerance; None = max(n, d)·eps
    near_duplicate_cosine: float = 0.999  # |cosine| counted as a near-duplicate pair
    confidence: float = 0.95  # level of the intervals and bounds
    method: str = "auto"  # auto | gram | qr numerics of the profile
    context_chunk: int = 64  # contexts per chunk read from the memory map

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> AssumptionsSettings:
        """Build from the (schema-defaulted) section; keys that are not settings are ignored."""
        names = {field.name for field in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in section.items() if key in names})

    def profile(
        self, queries: np.ndarray, samples: int, device: Any, workers: int, progress: bool = False
    ) -> KruskalProfile:
        """The Kruskal profile of ``queries`` from ``samples`` orderings, with these settings."""
        return kruskal_profile(
            queries,
            samples,
            seed=self.seed,
            rtol=self.rtol,
            near_duplicate_cosine=self.near_duplicate_cosine,
            device=device,
            method=self.method,
            progress=progress,
            workers=workers,
        )


# The contracted columns of results/assumptions/summary.csv, in order; extras follow them.
SUMMARY_COLUMNS = (
    "model",
    "layer",
    "T",
    "n",
    "d",
    "samples",
    "context_full_rank_frac",
    "kruskal_p_n",
    "general_position_p_d",
    "kruskal_rank_estimate",
)


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


def summary_row(
    model: str, layer: str, context: Mapping[str, Any], kruskal: Mapping[str, Any]
) -> dict[str, Any]:
    """One row of summary.csv: the contracted columns, then certificates and margins."""
    best = min(kruskal["certificates"], key=lambda c: c["size"], default=None)
    n_interval = kruskal.get("p_n_interval", [math.nan, math.nan])
    return {
        "model": model,
        "layer": layer,
        "T": kruskal["T"],
        "n": kruskal["n"],
        "d": kruskal["d"],
        "samples": kruskal["samples"],
        "context_full_rank_frac": context["full_rank_frac"],
        "kruskal_p_n": kruskal["p_n"],
        "general_position_p_d": kruskal["p_d"],
        "kruskal_rank_estimate": kruskal["estimate"],
        "kruskal_p_n_low": n_interval[0],
        "kruskal_p_n_high": n_interval[1],
        "kruskal_dependent_bound_n": kruskal.get("dependent_bound_n", math.nan),
        "kruskal_rank_upper_bound": kruskal["upper_bound"],
        "kruskal_rank_lower_bound": kruskal["lower_bound"],
        "kruskal_certificate": best["kind"] if best else "",
        "zero_queries": kruskal["pairs"]["zero_rows"],
        "duplicate_pairs": kruskal["pairs"]["duplicate_pairs"],
        "dependent_pairs": kruskal["pairs"]["dependent_pairs"],
        "near_duplicate_pairs": kruskal["pairs"]["near_duplicate_pairs"],
        "spectral_cap": kruskal["spectral_cap"],
        "contexts_checked": context["contexts_checked"],
        "context_rank_min": context["rank_min"],
        "context_worst_margin": context["worst_margin"],
        "context_svd_checked": context["svd_checked"],
        "rtol_queries": kruskal["rtol"],
        "rtol_contexts": context["rtol"],
        "kruskal_route": kruskal["route"],
        "kruskal_seconds": kruskal["seconds"],
    }


def summary_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """summary.csv: the contracted columns first (present even with no rows), then extras."""
    if not rows:
        return pd.DataFrame(columns=list(SUMMARY_COLUMNS))
    table = pd.DataFrame(rows)
    extras = [c for c in table.columns if c not in SUMMARY_COLUMNS]
    return table[list(SUMMARY_COLUMNS) + extras]


def plot_profile(table: pd.DataFrame, n: int, d: int, title: str) -> plt.Figure:
    """P(k) against k with its confidence band, n and d marked."""
    set_theme()
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    ax.fill_between(table["k"], table["p_low"], table["p_high"], alpha=0.25, step="mid")
    ax.step(table["k"], table["p_full_rank"], where="mid", label="P(k)")
    kmax = int(table["k"].max()) if len(table) else 1
    for k, label, style in ((n, f"n = {n}", "--"), (d, f"d = {d}", ":")):
        if k <= kmax:
            ax.axvline(k, color="0.3", linestyle=style, linewidth=1, label=label)
    ax.set(xlabel="subset size k", ylabel="fraction independent", ylim=(-0.03, 1.03))
    ax.set_title(title)
    ax.legend(loc="lower left")
    return fig


def plot_context_ranks(table: pd.DataFrame, n: int, title: str) -> plt.Figure:
    """Histogram of context ranks (n marked) and of their margins above the tolerance."""
    set_theme()
    fig, (left, right) = plt.subplots(1, 2, figsize=(8.4, 3.4))
    values, counts = np.unique(table["rank"].to_numpy(), return_counts=True)
    left.bar(values, counts, width=0.8)
    left.axvline(n, color="0.3", linestyle="--", linewidth=1, label=f"n = {n}")
    low, high = min(values.min(initial=n), n), max(values.max(initial=n), n)
    left.set(xlabel="numerical rank of E_t", ylabel="contexts", xlim=(low - 3, high + 3))
    left.xaxis.set_major_locator(MaxNLocator(integer=True))
    left.legend(loc="upper left")
    margins = table["margin_decades"].replace(-np.inf, np.nan).dropna()
    right.hist(margins, bins=30)
    right.axvline(0, color="0.3", linestyle="--", linewidth=1, label="tolerance")
    right.set(xlabel="log10(σ_min / tolerance)", ylabel="contexts")
    right.legend(loc="upper left")
    fig.suptitle(title)
    return fig
