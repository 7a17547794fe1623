"""The decision band around a rank tolerance: applies, does not apply, too close to call.

A rank decision at the tolerance τ·σ_max is only as good as its distance from that line. A
check *applies* when it holds with at least one decade to spare (every context has
σ_min > 10·τ·σ_max; every sampled k-subset is independent at 10·τ), *does not apply* when
dependence survives a tolerance one decade below the rounding level (τ/10) or is proved
exactly (a repeated or zero row, n > d, a certificate), and is *too close to call* otherwise.
The band is symmetric: one decade either way, for contexts and queries alike.

The band's two Kruskal profiles take the Gram route wherever τ²/BAND_FACTOR² stands at least
BAND_RESOLUTION times above the float64 Gram rounding (k·eps64): the line τ/10 is then placed
within a few per cent of itself, which moves no decision a decade away from τ (the QR route
costs about 40 times as much on MiniLM block 3).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

import numpy as np
import torch

from memcap.numerics.equilibrate import scaled_for_rank
from memcap.numerics.kruskal import KruskalProfile, kruskal_profile
from memcap.numerics.tolerance import EPS64, matrix_rank_rtol

BAND_DECADES = 1.0
BAND_FACTOR = 10.0**BAND_DECADES
BAND_RESOLUTION = 10.0


class Outcome(StrEnum):
    """Where a check falls against the band (``not tested``: nothing to decide on)."""

    APPLIES = "applies"
    DOES_NOT_APPLY = "does not apply"
    TOO_CLOSE = "too close to call"
    NOT_TESTED = "not tested"

    @property
    def slug(self) -> str:
        """One word for CSS classes and file names."""
        return {"applies": "applies", "does not apply": "fails", "too close to call": "close"}.get(
            self.value, "untested"
        )


def margin_outcome(margin_decades: float, proved: bool = False) -> Outcome:
    """The outcome of one decision from its margin log10(σ_min / (τ·σ_max)) in decades."""
    if proved or margin_decades <= -BAND_DECADES:
        return Outcome.DOES_NOT_APPLY
    if margin_decades >= BAND_DECADES:
        return Outcome.APPLIES
    return Outcome.TOO_CLOSE


@dataclass(frozen=True)
class KruskalBand:
    """Kruskal profiles of one query set at τ (the reported P(k)) and a decade either side.

    Attributes:
        profile: at τ = max(k, d)·eps(stored dtype) (or the configured rtol).
        strict: at BAND_FACTOR·τ: P(k) = 1 here means every sampled k-subset clears the
            tolerance by a decade (searched up to the largest decided k with P(k) = 1 at τ;
            NaN beyond).
        loose: at τ / BAND_FACTOR: a dependent subset or certificate here is dependence that
            survives a tolerance a decade below the rounding level (searched up to the largest
            decided k with P(k) < 1 at τ; NaN beyond).
    """

    profile: KruskalProfile
    strict: KruskalProfile
    loose: KruskalProfile

    def outcome(self, k: int, min_samples: int = 1) -> Outcome | None:
        """Outcome of "every k-subset is independent"; None when untestable (k > T).

        Args:
            k: subset size.
            min_samples: fewer sampled orderings than this cannot support "applies".
        """
        if k > self.profile.d:
            return Outcome.DOES_NOT_APPLY
        if k > self.profile.T:
            return None
        if k > self.loose.upper_bound:
            return Outcome.DOES_NOT_APPLY
        if self.profile.p[k] < 1.0 and self.loose.p[k] < 1.0:
            return Outcome.DOES_NOT_APPLY
        if self.profile.p[k] >= 1.0 and self.strict.p[k] >= 1.0:
            return Outcome.APPLIES if self.strict.samples >= min_samples else Outcome.TOO_CLOSE
        return Outcome.TOO_CLOSE


def kruskal_band(
    x: np.ndarray | torch.Tensor,
    samples: int,
    seed: int = 0,
    *,
    rtol: float | None = None,
    scaling: str = "equilibrate",
    decide: Sequence[int] = (),
    **options,
) -> KruskalBand:
    """:func:`~memcap.numerics.kruskal.kruskal_profile` at τ, BAND_FACTOR·τ and τ/BAND_FACTOR,
    on the same orderings (same ``seed``); the set is scaled once.

    Args:
        x: (T, d) queries; τ follows their stored dtype unless ``rtol`` is given.
        samples, seed: orderings, as for kruskal_profile.
        rtol: τ; None = max(min(T, d), d)·eps(dtype).
        scaling: equilibrate or none.
        decide: the subset sizes whose outcome is wanted (e.g. n and d); the band profiles
            search only as far as these need (empty: every k).
        **options: the other keyword arguments of kruskal_profile.
    """
    data = torch.as_tensor(x)
    if data.ndim != 2:
        raise ValueError(f"expected a (T, d) array, got shape {tuple(data.shape)}")
    t, d = data.shape
    tau = float(rtol) if rtol is not None else matrix_rank_rtol(min(t, d), d, data.dtype)
    values = scaled_for_rank(data, scaling)
    resolves = (tau / BAND_FACTOR) ** 2 >= BAND_RESOLUTION * min(t, d) * EPS64
    method = options.pop("method", "auto")

    def at(factor: float, max_k: int | None = None) -> KruskalProfile:
        route = "gram" if method == "auto" and factor != 1.0 and resolves else method
        profile = kruskal_profile(
            values, samples, seed, rtol=tau * factor, scaling="none", method=route,
            max_k=max_k, **options,
        )  # fmt: skip
        return replace(profile, scaling=scaling)  # the set was scaled before the call

    profile = at(1.0)
    # P(k) can only fall as the tolerance grows: where P(k) < 1 at τ it is below 1 at 10·τ
    # too, and where P(k) = 1 at τ it is 1 at τ/10. Each band profile searches only as far as
    # the sizes it has to decide.
    kmax = min(t, d)
    sizes = [k for k in (decide or range(1, kmax + 1)) if 1 <= k <= kmax]
    holding = [k for k in sizes if profile.p[k] >= 1.0]
    failing = [k for k in sizes if profile.p[k] < 1.0]
    return KruskalBand(
        profile=profile,
        strict=at(BAND_FACTOR, max(holding, default=1)),
        loose=at(1.0 / BAND_FACTOR, max(failing, default=1)),
    )
