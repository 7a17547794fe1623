"""Numerics of the assumption checks: rank-tolerance rules, the equilibration every decision is
made on, the decision band, context ranks (Assumption 2) and the Kruskal profile of the
queries (Assumption 1, general position) with its search.

The algorithm is described in :mod:`memcap.numerics.kruskal` and docs/kruskal.md. The names
below are imported on first use (PEP 562), so a module that needs only a torch-free part
(:mod:`~memcap.numerics.outcome`, :mod:`~memcap.numerics.error`, the report) does not import
torch and SciPy with the package.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_SOURCES = {
    "band": ("BAND_DECADES", "KruskalBand", "kruskal_band", "margin_outcome"),
    "certificates": ("Certificate",),
    "context_rank": (
        "ContextRanks", "ContextRankStream", "context_ranks", "load_context_ranks",
        "rank_histogram", "save_context_ranks",
    ),
    "equilibrate": ("SCALINGS", "balance", "scaled_for_rank"),
    "kruskal": ("KruskalProfile", "kruskal_profile"),
    "outcome": ("Outcome",),
    "pairs": ("PairStats", "pair_statistics"),
    "sampling": ("orderings",),
    "spectral": ("spectral_cap",),
    "statistics": ("clopper_pearson", "upper_confidence_bound"),
    "tolerance": ("dtype_eps", "matrix_rank_rtol"),
}  # fmt: skip
_MODULE_OF = {name: module for module, names in _SOURCES.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    if name not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_MODULE_OF[name]}"), name)
