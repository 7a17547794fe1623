"""The decision scale: how far the stored vectors may sit from the exact forward pass.

A set of vectors is only known up to the error of the arithmetic that computed it. The
extraction measures that error (:mod:`memcap.extract.forward_error`: the same inputs through
the model in float64 and in its run precision): δ, the worst relative perturbation of one
vector (queries) or of one matrix (contexts) over the examples measured. Without a measurement
δ is the unit roundoff of the stored dtype (storing rounds every entry by at most that much).

By Weyl's inequality a perturbation ΔA moves σ_min(A) by at most ‖ΔA‖₂. Where the vectors'
errors are independent, ‖ΔA‖₂ stays at about the largest vector's, δ·max‖x_i‖ — up to
1 + √(k/d) ≤ 2 — whatever k, while σ_max(A) grows with what the vectors share (a set's
*concentration* c = σ_max(A)/max‖x_i‖, between 1 and √k). Where they share a part (the error of
a shared component), that part grows with σ_max(A): the relative perturbation of the measured
query matrix, δ_aligned = ‖ΔQ‖₂/‖Q‖₂, bounds it. The scale's two lines, on σ_min/σ_max:

* **zero**: σ_min/σ_max ≤ ERROR_FACTOR·max(δ/c, δ_aligned) — a perturbation of the measured
  size (the worst of the examples measured, doubled for the noise's growth with k and the
  examples not measured) can make the set exactly dependent: numerically it is dependent;
* **clear**: 10^CLEAR_DECADES times the zero line — independent with a decade to spare.

A single matrix whose perturbation was measured in the 2-norm (a context) has c = 1: its zero
line is ERROR_FACTOR·δ relative to its σ_max. Between the two lines a set is within a decade of
the measured error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from memcap.numerics.tolerance import dtype_eps

if TYPE_CHECKING:
    import torch

# The measured worst relative error is doubled for the examples the measurement did not see.
ERROR_FACTOR = 2.0
# "Clear" of the error: this many decades above the zero line.
CLEAR_DECADES = 1.0


@dataclass(frozen=True)
class ErrorScale:
    """δ, the relative perturbation every decision is measured against.

    Attributes:
        relative: δ (per vector for query sets, per matrix for contexts).
        source: where δ comes from, in words (a measurement, or the stored dtype's rounding).
        aligned: δ_aligned, the relative perturbation of a measured set of vectors (the part
            of the error they share); 0 for independent errors (storage rounding).
    """

    relative: float
    source: str
    aligned: float = 0.0

    @property
    def zero_line(self) -> float:
        """σ_min/σ_max at or below which a set of concentration 1 is dependent within the error
        (a matrix whose 2-norm perturbation was measured; the least concentrated set)."""
        return ERROR_FACTOR * self.relative

    @property
    def clear_line(self) -> float:
        """The zero line times a decade: independent with a decade to spare."""
        return self.zero_line * 10.0**CLEAR_DECADES

    def zero_lines(self, concentration: float | np.ndarray) -> np.ndarray:
        """The zero line of sets of this concentration σ_max(A)/max‖x_i‖."""
        spread = self.relative / np.maximum(np.asarray(concentration, dtype=float), 1.0)
        return ERROR_FACTOR * np.maximum(spread, self.aligned)

    def margin(
        self, ratio: float | np.ndarray, concentration: float | np.ndarray = 1.0
    ) -> np.ndarray:
        """log10 of σ_min/σ_max over the zero line: ≤ 0 zero, ≥ CLEAR_DECADES clear."""
        with np.errstate(divide="ignore"):
            return np.log10(np.asarray(ratio, dtype=float)) - np.log10(
                self.zero_lines(concentration)
            )


def stored_error(dtype: np.dtype | torch.dtype, source: str = "") -> ErrorScale:
    """The scale of values known only to their storage: δ = eps(dtype)/2 (unit roundoff)."""
    unit = dtype_eps(dtype) / 2
    return ErrorScale(unit, source or f"the {_name(dtype)} rounding of the stored values")


def as_error_scale(error: ErrorScale | float | None, dtype: np.dtype | torch.dtype) -> ErrorScale:
    """``error`` as an :class:`ErrorScale`: given, a bare δ, or the dtype's rounding (None)."""
    if error is None:
        return stored_error(dtype)
    if isinstance(error, ErrorScale):
        return error
    value = float(error)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"the relative error must be a finite number >= 0, not {error!r}")
    return ErrorScale(value, "given")


def _name(dtype: np.dtype | torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
