"""The ``assumptions`` config section as a typed settings object."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from memcap.numerics import ContextRanks, KruskalBand, KruskalProfile, kruskal_band, kruskal_profile
from memcap.numerics.band import NullSource
from memcap.numerics.error import ErrorScale


@dataclasses.dataclass(frozen=True)
class AssumptionsSettings:
    """The ``assumptions`` config section (see the schema for each key)."""

    samples: int = 500  # random orderings S per detail layer
    depth_samples: int = 100  # random orderings S per depth row (check_assumptions)
    general_position_samples: int = 100  # the first S of them decide general position (k = d)
    seed: int = 0  # seed of the orderings
    scaling: str = "equilibrate"  # equilibrate | none (paper A's raw rule) for every decision
    rtol: float | None = None  # query-subset tolerance; None = max(k, d)·eps
    context_rtol: float | None = None  # context tolerance; None = max(n, d)·eps
    near_duplicate_cosine: float = 0.999  # |cosine| counted as a near-duplicate pair
    confidence: float = 0.95  # level of the intervals and bounds
    method: str = "auto"  # auto | gram | qr numerics of the profile
    kruskal_search: str = "host"  # host | device | auto: where the Gram route searches
    context_chunk: int = 64  # contexts per chunk read from the memory map

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> AssumptionsSettings:
        """Build from the (schema-defaulted) section; keys that are not settings are ignored."""
        names = {field.name for field in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in section.items() if key in names})

    def band(
        self,
        queries: np.ndarray,
        samples: int,
        device: Any,
        workers: int,
        progress: bool = False,
        decide: Sequence[int] = (),
        error: ErrorScale | None = None,
        null: NullSource | None = None,
    ) -> KruskalBand:
        """The Kruskal profiles of ``queries`` at the tolerance and a decade either side, from
        ``samples`` orderings, with these settings, and the decisions at ``decide`` (n, d)
        against ``error`` and the random null (``null``: where it comes from)."""
        return kruskal_band(
            queries, samples, self.seed, rtol=self.rtol, scaling=self.scaling, decide=decide,
            error=error, null=null, general_position_samples=self.general_position_samples,
            **self._options(device, workers, progress),
        )  # fmt: skip

    def raw(self, queries: np.ndarray, samples: int, device: Any, workers: int) -> KruskalProfile:
        """Paper A's rule: the profile on the stored values at the tolerance."""
        return kruskal_profile(
            queries, samples, self.seed, rtol=self.rtol, scaling="none",
            **self._options(device, workers, False),
        )  # fmt: skip

    def deciding(self, ranks: ContextRanks) -> ContextRanks:
        """The context ranks taken with this scaling (the stored values' twin for none).

        Raises:
            ValueError: equilibrated ranks asked of a file that holds only the stored values'
                (written by an extraction with scaling none): re-run the extraction.
        """
        if self.scaling == ranks.scaling:
            return ranks
        if self.scaling == "none" and ranks.raw is not None:
            return ranks.raw
        raise ValueError(
            f"assumptions.scaling is {self.scaling!r} but the context ranks were computed with "
            f"scaling {ranks.scaling!r}: re-run the extraction (delete results/extract/) so "
            "context_ranks.npz holds both"
        )

    def _options(self, device: Any, workers: int, progress: bool) -> dict[str, Any]:
        return {
            "near_duplicate_cosine": self.near_duplicate_cosine,
            "device": device,
            "method": self.method,
            "search": self.kruskal_search,
            "progress": progress,
            "workers": workers,
        }
