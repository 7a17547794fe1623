"""The decision at a subset size k: the measured error, the random null and exact proofs.

"Every k-subset of the queries is independent" is decided on three references:

* **exact proofs** (:class:`Proof`): a zero vector, identical queries, a dependent set verified
  by SVD against the measured error's zero line (a circuit, :mod:`memcap.numerics.circuits`),
  or the spectrum of the whole set (σ_k(X) under the zero line: every k-subset is dependent);
  a proof of size c ≤ k bounds the Kruskal rank by c − 1;
* **the measured error** (:mod:`memcap.numerics.error`): each sampled k-subset's σ_min/σ_max
  against its zero line (dependent within the error) and its clear line (a decade above);
* **the random null** (:mod:`memcap.numerics.null`): the same S orderings of an i.i.d.
  Gaussian of the same shape, dtype and scaling. The lower tails are compared: of the
  TAIL_FRACTION lowest of the 2S pooled ratios, how many are the data's (a hypergeometric
  test at level SIGNIFICANCE), and by how many decades the data's TAIL_FRACTION quantile sits
  below the null's (at least NULL_DECADES to count).

The reading is one of "dependent (exact or structural)" (a proof), "less independent than
random data (by X decades)" or "as independent as random data"; the outcome follows:

* **does not apply**: a proof of size ≤ k; or more sampled subsets under the zero line than
  the null has (one-sided Fisher test at ZERO_SIGNIFICANCE);
* **applies**: every sampled subset clear of the error; or the data as independent as random
  data (a Gaussian's own near-singular square subsets do not count against it);
* **too close to call**: otherwise, and whenever fewer orderings than the caller's minimum
  would apply.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import StrEnum

import numpy as np

from memcap.numerics.error import CLEAR_DECADES, ErrorScale
from memcap.numerics.ratios import PrefixRatios

# The lower tail compared with the null: this fraction of the pooled ratios.
TAIL_FRACTION = 0.1
# Level of the tail test, and the shift (decades) below which the data read as random.
SIGNIFICANCE = 0.01
NULL_DECADES = 0.5
# Level of "more subsets under the zero line than random data has".
ZERO_SIGNIFICANCE = 0.001


class Reading(StrEnum):
    """What the data are, against the null and the measured error."""

    RANDOM = "as independent as random data"
    LESS = "less independent than random data"
    DEPENDENT = "dependent (exact or structural)"


# Outcomes, as strings (memcap.numerics.band.Outcome holds the same values).
APPLIES, DOES_NOT_APPLY, TOO_CLOSE = "applies", "does not apply", "too close to call"


@dataclass(frozen=True)
class Proof:
    """An exact bound on the Kruskal rank: a dependent set of ``size`` queries.

    Attributes:
        kind: zero vector, identical pair, dependent pair, circuit, spectrum or more than d.
        size: the set's size: the Kruskal rank is at most size − 1.
        detail: its numbers in words.
        indices: its rows (empty for spectrum: every set of that size).
    """

    kind: str
    size: int
    detail: str
    indices: tuple[int, ...] = ()


@dataclass(frozen=True)
class SizeDecision:
    """The decision at one k, with every number behind it.

    Attributes:
        k: the subset size.
        outcome: applies, does not apply or too close to call (before a minimum of orderings).
        reading: against the null (and proofs).
        decades: how far the data's lower tail sits below the null's (> 0: less independent).
        samples: sampled orderings.
        zero: sampled k-subsets at or below their zero line; ``null_zero`` the null's.
        clear: sampled k-subsets clear of the error by the margin.
        worst_margin: min over samples of log10(σ_min/σ_max ÷ zero line) (≤ 0: zero).
        data_tail, null_tail: the TAIL_FRACTION quantiles of σ_min/σ_max.
        p_tail, p_zero: p-values of the tail and zero-count tests.
        proof: the smallest proof of size ≤ k, if any.
    """

    k: int
    outcome: str
    reading: Reading
    decades: float = math.nan
    samples: int = 0
    zero: int = 0
    null_zero: int = 0
    clear: int = 0
    worst_margin: float = math.nan
    data_tail: float = math.nan
    null_tail: float = math.nan
    p_tail: float = math.nan
    p_zero: float = math.nan
    proof: Proof | None = None

    def outcome_for(self, min_samples: int) -> str:
        """The outcome when at least ``min_samples`` orderings are needed to apply."""
        if self.outcome == APPLIES and self.samples < min_samples:
            return TOO_CLOSE
        return self.outcome

    @property
    def text(self) -> str:
        """The reading in words, with its decades."""
        if self.reading is Reading.LESS and math.isfinite(self.decades):
            return f"{self.reading.value} (by {self.decades:.1f} decades)"
        return self.reading.value

    def record(self) -> dict:
        """JSON-able fields."""
        fields = {
            key: value for key, value in self.__dict__.items() if key not in ("reading", "proof")
        }
        fields["reading"] = self.text
        fields["proof"] = (
            None
            if self.proof is None
            else self.proof.__dict__ | {"indices": list(self.proof.indices)}
        )
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                for k, v in fields.items()}  # fmt: skip


def decide_size(
    k: int,
    data: PrefixRatios | None,
    null: PrefixRatios | None,
    error: ErrorScale,
    proofs: tuple[Proof, ...] = (),
) -> SizeDecision:
    """The decision at ``k`` from the sampled ratios, the null's and the proofs.

    Args:
        k: subset size.
        data: the data's k-prefix ratios (None: no ratio computed, e.g. k above the spectrum's
            cap, where a proof decides).
        null: the null's, on the same orderings.
        error: the decision scale.
        proofs: every proof found; those of size ≤ k decide.
    """
    proof = min((p for p in proofs if p.size <= k), key=lambda p: p.size, default=None)
    if proof is not None:
        return SizeDecision(k, DOES_NOT_APPLY, Reading.DEPENDENT, proof=proof,
                            samples=0 if data is None else data.samples)  # fmt: skip
    if data is None or null is None:
        raise ValueError(f"no ratios at k = {k} and no proof to decide it")
    margins = error.margin(np.maximum(data.ratio, 1e-300), data.concentration)
    zero = int((margins <= 0).sum())
    null_zero = int((null.ratio <= error.zero_lines(null.concentration)).sum())
    clear = int((margins >= CLEAR_DECADES).sum())
    decades, p_tail = tail_shift(data.ratio, null.ratio)
    # Fisher's exact test, one-sided: the data's zero count among all zero counts, margins fixed
    p_zero = hypergeometric_sf(zero, data.samples + null.samples, zero + null_zero, data.samples)
    less = p_tail < SIGNIFICANCE and decades >= NULL_DECADES
    common = SizeDecision(
        k, TOO_CLOSE, Reading.LESS if less else Reading.RANDOM, decades, data.samples, zero,
        null_zero, clear, float(margins.min()), _quantile(data.ratio), _quantile(null.ratio),
        p_tail, p_zero,
    )  # fmt: skip
    if zero and p_zero < ZERO_SIGNIFICANCE:
        return replace(common, outcome=DOES_NOT_APPLY, reading=Reading.LESS)
    if clear == data.samples or not less:
        return replace(common, outcome=APPLIES)
    return common


def tail_shift(data: np.ndarray, null: np.ndarray) -> tuple[float, float]:
    """(decades, p): how far the data's lower tail sits below the null's, and the one-sided
    p-value that the pooled lowest TAIL_FRACTION hold as many of the data's ratios by chance."""
    pooled = np.concatenate([data, null])
    low = max(1, int(math.ceil(TAIL_FRACTION * pooled.size)))
    cut = np.partition(pooled, low - 1)[low - 1]
    from_data = min(int((data <= cut).sum()), low)
    p = hypergeometric_sf(from_data, pooled.size, data.size, low)
    decades = math.log10(_quantile(null)) - math.log10(_quantile(data))
    return decades, p


def hypergeometric_sf(at_least: int, total: int, marked: int, drawn: int) -> float:
    """P(X ≥ at_least) for X the marked items among ``drawn`` of ``total`` drawn without
    replacement (exact integer arithmetic; scipy.stats costs seconds to import)."""
    top = min(marked, drawn)
    if at_least <= max(0, drawn - (total - marked)):
        return 1.0
    tail = sum(
        math.comb(marked, i) * math.comb(total - marked, drawn - i)
        for i in range(at_least, top + 1)
    )
    return float(tail / math.comb(total, drawn)) if tail else 0.0


def _quantile(ratios: np.ndarray) -> float:
    # float64 resolves no ratio below ~1e-16: an exact zero counts as that
    return float(max(np.quantile(ratios, TAIL_FRACTION), 1e-16))
