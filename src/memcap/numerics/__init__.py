"""Numerics of the assumption checks: rank-tolerance rules, the equilibration every decision is
made on, the decision band, context ranks (Assumption 2) and the Kruskal profile of the
queries (Assumption 1, general position) with its search.

The algorithm is described in :mod:`memcap.numerics.kruskal` and docs/kruskal.md.
"""

from memcap.numerics.band import (
    BAND_DECADES,
    KruskalBand,
    Outcome,
    kruskal_band,
    margin_outcome,
)
from memcap.numerics.certificates import Certificate
from memcap.numerics.context_rank import (
    ContextRanks,
    ContextRankStream,
    context_ranks,
    load_context_ranks,
    rank_histogram,
    save_context_ranks,
)
from memcap.numerics.equilibrate import SCALINGS, balance, scaled_for_rank
from memcap.numerics.kruskal import KruskalProfile, kruskal_profile
from memcap.numerics.pairs import PairStats, pair_statistics
from memcap.numerics.sampling import orderings
from memcap.numerics.spectral import spectral_cap
from memcap.numerics.statistics import clopper_pearson, upper_confidence_bound
from memcap.numerics.tolerance import dtype_eps, matrix_rank_rtol

__all__ = [
    "BAND_DECADES",
    "SCALINGS",
    "KruskalBand",
    "Outcome",
    "balance",
    "kruskal_band",
    "margin_outcome",
    "scaled_for_rank",
    "Certificate",
    "ContextRankStream",
    "ContextRanks",
    "KruskalProfile",
    "PairStats",
    "clopper_pearson",
    "context_ranks",
    "load_context_ranks",
    "dtype_eps",
    "kruskal_profile",
    "matrix_rank_rtol",
    "orderings",
    "pair_statistics",
    "rank_histogram",
    "save_context_ranks",
    "spectral_cap",
    "upper_confidence_bound",
]
