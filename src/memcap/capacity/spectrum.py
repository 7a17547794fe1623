"""The rank of Z read from its singular values: its gap, against the inputs' measured error.

The embeddings Z is built from are known only to the forward pass's error: the extraction
measures, per layer, the worst relative error δ of one query and of one context against a
float64 forward (:mod:`memcap.extract.forward_error`); storing them in float32 adds rounding
ε_in = 1.19e-7. Carried to Z as a relative perturbation of its Frobenius norm, doubled as every
decision on the measured error is (``ERROR_FACTOR``: the examples the measurement did not see),
that gives the *floor*

    f = max(ε_in, 2δ) · ‖Z‖_F / σ_max   (and at least max(T, H·d)·ε_float64),

relative to σ_max: by Weyl's inequality a singular value below f·σ_max could be the error alone,
so only thresholds at or above f are *resolvable*. From the floor up:

* ``rank_high``: the count above f, every singular value the error cannot produce: the rank a
  resolvable threshold can reach at most, and the ``certified`` capacity;
* ``rank_low``: the count at the first decade gap at or above the floor: the largest
  k ≤ rank_high with σ_k ≥ 10·σ_k+1; 0 when no kept value stands a decade above the next;
* *resolved* when the two agree: the last kept value is a decade above the first dropped one,
  the floor lies in that gap, and every resolvable threshold in it gives the same count.

An unresolved rank is not a single number: the counts at the resolvable thresholds from the
floor up to the first decade gap run from rank_high down to rank_low, or, with no decade gap
above the floor at all, the rank is not resolved at float32.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from memcap.numerics.error import CLEAR_DECADES, ERROR_FACTOR
from memcap.numerics.tolerance import EPS64

GAP_DECADES = CLEAR_DECADES  # a rank is one number with this many decades of gap


@dataclass(frozen=True)
class Spectrum:
    """The singular values of one Z, relative to σ_max, and Z's shape."""

    relative: np.ndarray  # σ_i / σ_max, descending, min(T, H·d) of them; empty for Z = 0
    shape: tuple[int, int]  # (T, H·d)

    @classmethod
    def of(cls, singular: np.ndarray, shape: tuple[int, int]) -> Spectrum:
        """From absolute singular values (any order); Z's others, up to min(shape), are 0."""
        values = np.sort(np.asarray(singular, dtype=np.float64))[::-1]
        if values.size == 0 or values[0] <= 0:
            return cls(np.zeros(0), shape)
        padded = np.zeros(max(min(shape), values.size))
        padded[: values.size] = values / values[0]
        return cls(padded, shape)

    @property
    def frobenius(self) -> float:
        """‖Z‖_F / σ_max."""
        return float(np.linalg.norm(self.relative))


@dataclass(frozen=True)
class RankReading:
    """A numerical rank of Z with its edge and its floor, all relative to σ_max."""

    rank_high: int  # count above the floor: the certified capacity
    rank_low: int  # count at the first decade gap at or above the floor (0: none)
    last_kept: float  # σ_rank_high (NaN for a zero matrix)
    first_dropped: float  # σ_rank_high+1 (0 at full rank min(T, H·d))
    floor: float  # f: the inputs' error carried to Z

    @property
    def resolved(self) -> bool:
        """Whether the rank is one number: a decade of gap at the floor's count."""
        return self.rank_high > 0 and self.rank_low == self.rank_high

    @property
    def gap_decades(self) -> float:
        """log10 of last kept / first dropped (inf when the first dropped is 0)."""
        return _decades(self.last_kept, self.first_dropped)

    @property
    def kept_decades(self) -> float:
        """How many decades the last kept value sits above the floor."""
        return _decades(self.last_kept, self.floor)

    @property
    def dropped_decades(self) -> float:
        """How many decades the first dropped value sits above the floor (< 0: below)."""
        return _decades(self.first_dropped, self.floor)

    def record(self) -> dict[str, Any]:
        """The table columns of this reading (``certified`` is ``rank_high``)."""
        return {
            "certified": self.rank_high,
            "last_kept": self.last_kept,
            "first_dropped": self.first_dropped,
            "rank_low": self.rank_low,
            "rank_high": self.rank_high,
            "resolved": self.resolved,
            "floor": self.floor,
            "gap_decades": self.gap_decades,
            "kept_decades": self.kept_decades,
            "dropped_decades": self.dropped_decades,
        }


def error_floor(spectrum: Spectrum, input_eps: float, delta: float | None) -> float:
    """f, relative to σ_max: the inputs' error (rounding ε_in, measured δ) carried to Z."""
    relative = max(input_eps, ERROR_FACTOR * (delta or 0.0))
    return max(max(spectrum.shape) * EPS64, relative * spectrum.frobenius)


def read_rank(spectrum: Spectrum, floor: float) -> RankReading:
    """The rank above ``floor`` (relative to σ_max) and the count at the first decade gap."""
    s = spectrum.relative
    if s.size == 0:
        return RankReading(0, 0, math.nan, 0.0, floor)
    high = int((s > floor).sum())
    following = np.append(s[1:], 0.0)
    gaps = np.flatnonzero(s[:high] >= 10.0**GAP_DECADES * following[:high])
    low = int(gaps[-1]) + 1 if gaps.size else 0
    kept = float(s[high - 1]) if high else math.nan
    dropped = float(s[high]) if high < s.size else 0.0
    return RankReading(high, low, kept, dropped, floor)


def forward_error(provenance: Mapping[str, Any]) -> float | None:
    """δ of a layer from its extraction provenance: the worst relative error of one query or
    one context matrix on the stored values (None when the forward error was not measured)."""
    record = provenance.get("forward_error")
    if not record:
        return None
    queries = float(record["queries"]["none"]["vector_worst"])
    return max(queries, float(record["contexts"]["none"]["matrix_worst"]))


def _decades(value: float, reference: float) -> float:
    if math.isnan(value):
        return math.nan
    if reference <= 0:
        return math.inf
    if value <= 0:
        return -math.inf
    return math.log10(value / reference)
