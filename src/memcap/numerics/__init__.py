"""Numerics of the assumption checks: rank-tolerance rules, context ranks (Assumption 2) and
the Kruskal profile of the queries (Assumption 1, general position) with its search.

The algorithm is described in :mod:`memcap.numerics.kruskal` and docs/kruskal.md.
"""

from memcap.numerics.certificates import Certificate
from memcap.numerics.context_rank import (
    ContextRanks,
    ContextRankStream,
    context_ranks,
    load_context_ranks,
    rank_histogram,
    save_context_ranks,
)
from memcap.numerics.kruskal import KruskalProfile, kruskal_profile
from memcap.numerics.pairs import PairStats, pair_statistics
from memcap.numerics.sampling import orderings
from memcap.numerics.spectral import spectral_cap
from memcap.numerics.statistics import clopper_pearson, upper_confidence_bound
from memcap.numerics.tolerance import dtype_eps, matrix_rank_rtol

__all__ = [
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
