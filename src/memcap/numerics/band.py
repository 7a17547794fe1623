"""The decision band around a rank tolerance, and the decisions of a query set.

Contexts (one matrix each) fall in a symmetric band of one decade around a line:
:func:`margin_outcome` (applies a decade above, does not apply a decade below or on an exact
proof, too close to call between); the assumptions stage draws that line at the measured
error of the forward pass.

Query sets get three Kruskal profiles on the same orderings — at τ = max(k, d)·eps (the
reported P(k), paper A's rule on the balanced set), 10·τ and τ/10 — and, at the sizes asked
for, a decision against the measured error, the random null and exact proofs
(:mod:`memcap.numerics.decision`): :meth:`KruskalBand.outcome`. The dependent prefixes the
profile meets are reduced to circuits (:mod:`memcap.numerics.circuits`).

The band's two extra profiles take the Gram route wherever τ²/BAND_FACTOR² stands at least
BAND_RESOLUTION times above the float64 Gram rounding (k·eps64): the line τ/10 is then placed
within a few per cent of itself (the QR route costs about 40 times as much on MiniLM block 3).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from memcap.numerics.circuits import Circuit, reduce_prefixes
from memcap.numerics.decision import (
    DOES_NOT_APPLY,
    Proof,
    Reading,
    SizeDecision,
    decide_size,
)
from memcap.numerics.equilibrate import scaled_for_rank
from memcap.numerics.error import ErrorScale, as_error_scale
from memcap.numerics.kruskal import KruskalProfile, kruskal_profile, scaled_float64
from memcap.numerics.null import NullKey, null_key, null_ratios
from memcap.numerics.outcome import Outcome
from memcap.numerics.pairs import pair_statistics
from memcap.numerics.ratios import PrefixRatios, prefix_ratios
from memcap.numerics.sampling import orderings
from memcap.numerics.tolerance import EPS64, matrix_rank_rtol

BAND_DECADES = 1.0
BAND_FACTOR = 10.0**BAND_DECADES
BAND_RESOLUTION = 10.0
# Orderings the decision at k = d reads (the first of the profile's; docs/decisions.md).
GENERAL_POSITION_SAMPLES = 100


def margin_outcome(margin_decades: float, proved: bool = False) -> Outcome:
    """The outcome of one decision from its margin log10(σ_min / (τ·σ_max)) in decades."""
    if proved or margin_decades <= -BAND_DECADES:
        return Outcome.DOES_NOT_APPLY
    if margin_decades >= BAND_DECADES:
        return Outcome.APPLIES
    return Outcome.TOO_CLOSE


@dataclass(frozen=True)
class KruskalBand:
    """Kruskal profiles of one query set at τ (the reported P(k)) and a decade either side,
    and the decisions at the sizes asked for (:mod:`memcap.numerics.decision`).

    Attributes:
        profile: at τ = max(k, d)·eps(stored dtype) (or the configured rtol).
        strict: at BAND_FACTOR·τ: P(k) = 1 here means every sampled k-subset clears the
            tolerance by a decade (searched up to the largest decided k with P(k) = 1 at τ;
            NaN beyond).
        loose: at τ / BAND_FACTOR (searched up to the largest decided k with P(k) < 1 at τ;
            NaN beyond).
        error: the decision scale (measured error, or the stored dtype's rounding).
        proofs: exact bounds on the Kruskal rank at that scale (zero vectors, identical or
            dependent pairs, circuits, the spectrum).
        circuits: the dependent sets the profile's dependent prefixes reduce to.
        decider: computes (and keeps) the decision at any k.
    """

    profile: KruskalProfile
    strict: KruskalProfile
    loose: KruskalProfile
    error: ErrorScale | None = None
    proofs: tuple[Proof, ...] = ()
    circuits: tuple[Circuit, ...] = ()
    decider: Decider | None = field(default=None, compare=False, repr=False)

    @property
    def certified_upper(self) -> int:
        """The Kruskal rank bound the proofs give (min(T, d) without one)."""
        return min([min(self.profile.T, self.profile.d)] + [p.size - 1 for p in self.proofs])

    def decision(self, k: int) -> SizeDecision | None:
        """The decision at ``k`` (None when k > T: no k-subset exists)."""
        if k > self.profile.d:
            proof = Proof("more than d", self.profile.d + 1, f"{k} vectors in R^{self.profile.d}")
            return SizeDecision(k, DOES_NOT_APPLY, Reading.DEPENDENT, proof=proof)
        if k > self.profile.T or self.decider is None:
            return None
        return self.decider.decide(k)

    def outcome(self, k: int, min_samples: int = 1) -> Outcome | None:
        """Outcome of "every k-subset is independent"; None when untestable (k > T).

        Does not apply: dependence beyond the random null and the measured error (an exact
        proof, or more sampled subsets dependent within the error than random data have).

        Args:
            k: subset size.
            min_samples: fewer sampled orderings than this cannot support "applies".
        """
        decided = self.decision(k)
        return None if decided is None else Outcome(decided.outcome_for(min_samples))

    def tau_outcome(self, k: int, min_samples: int = 1) -> Outcome | None:
        """Today's rule beside it: the band of a decade either side of τ (applies: every sampled
        k-subset independent at 10·τ; does not apply: dependent at τ/10 or a certificate at
        τ/10 below k); None when k > T."""
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


NullSource = Callable[[NullKey, Sequence[int]], Mapping[int, PrefixRatios]]
_NULLS: dict[tuple[NullKey, int], PrefixRatios] = {}


def cached_null(key: NullKey, sizes: Sequence[int]) -> dict[int, PrefixRatios]:
    """:func:`~memcap.numerics.null.null_ratios`, kept in this process per key and size."""
    missing = [k for k in sizes if (key, k) not in _NULLS]
    _NULLS.update({(key, k): r for k, r in null_ratios(key, missing).items()})
    return {k: _NULLS[(key, k)] for k in sizes if (key, k) in _NULLS}


class Decider:
    """The decisions of one query set, computed on demand and kept per k."""

    def __init__(
        self,
        x: torch.Tensor,
        gram: np.ndarray,
        orders: np.ndarray,
        error: ErrorScale,
        proofs: tuple[Proof, ...],
        key: NullKey,
        null: NullSource,
        general_position_samples: int | None = None,
    ) -> None:
        self.x, self.gram, self.orders = x, gram, orders
        self.error, self.proofs, self.key, self.null = error, proofs, key, null
        self.general_position_samples = general_position_samples
        self._decided: dict[int, SizeDecision] = {}

    def decide(self, k: int) -> SizeDecision:
        """The decision at k ≤ min(T, d)."""
        if k not in self._decided:
            self.prepare([k])
        return self._decided[k]

    def prepare(self, sizes: Sequence[int]) -> None:
        """Decide every size in ``sizes`` (the null of each drawn with the orderings it reads)."""
        kmax = min(self.x.shape)
        todo = [k for k in sizes if 1 <= k <= kmax and k not in self._decided]
        for k in todo:
            if any(p.size <= k for p in self.proofs):
                self._decided[k] = decide_size(k, None, None, self.error, self.proofs)
                continue
            orders = self._orders(k)[: self._samples(k)]
            key = replace(self.key, samples=len(orders))
            data = prefix_ratios(self.x, orders, k, self.gram, self.error.zero_lines)
            self._decided[k] = decide_size(k, data, self.null(key, [k])[k], self.error, self.proofs)

    def _samples(self, k: int) -> int:
        """The orderings the decision at k reads: all, or the first few at k = d."""
        if k == self.x.shape[1] and self.general_position_samples is not None:
            return min(self.key.samples, self.general_position_samples)
        return self.key.samples

    def _orders(self, k: int) -> np.ndarray:
        if self.orders.shape[1] < k:
            self.orders = orderings(self.x.shape[0], self.key.samples, self.key.seed, k).numpy()
        return self.orders


def kruskal_band(
    x: np.ndarray | torch.Tensor,
    samples: int,
    seed: int = 0,
    *,
    rtol: float | None = None,
    scaling: str = "equilibrate",
    decide: Sequence[int] = (),
    error: ErrorScale | float | None = None,
    null: NullSource | None = None,
    general_position_samples: int | None = GENERAL_POSITION_SAMPLES,
    **options,
) -> KruskalBand:
    """:func:`~memcap.numerics.kruskal.kruskal_profile` at τ, BAND_FACTOR·τ and τ/BAND_FACTOR,
    on the same orderings (same ``seed``); the set is scaled once; then the proofs at the
    decision scale and the decisions at ``decide``.

    Args:
        x: (T, d) queries; τ follows their stored dtype unless ``rtol`` is given.
        samples, seed: orderings, as for kruskal_profile.
        rtol: τ; None = max(min(T, d), d)·eps(dtype).
        scaling: equilibrate or none.
        decide: the subset sizes whose outcome is wanted (e.g. n and d), decided at once; the
            band profiles search only as far as these need (empty: every k, each decided
            when asked).
        error: the decision scale: an :class:`ErrorScale`, a relative error δ, or None for the
            stored dtype's rounding.
        null: where the random null comes from (default: computed here, kept per key).
        general_position_samples: the decision at k = d (general position, reported, not
            required) reads the first this many orderings (None: all): square subsets cost
            the most to resolve, and the depth rows' S then matches the detail layers'.
        **options: the other keyword arguments of kruskal_profile.
    """
    data = torch.as_tensor(x)
    if data.ndim != 2:
        raise ValueError(f"expected a (T, d) array, got shape {tuple(data.shape)}")
    t, d = data.shape
    tau = float(rtol) if rtol is not None else matrix_rank_rtol(min(t, d), d, data.dtype)
    scale = as_error_scale(error, data.dtype)
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
    strict = at(BAND_FACTOR, max(holding, default=1))
    loose = at(1.0 / BAND_FACTOR, max(failing, default=1))
    exact = scaled_float64(values)
    gram = (exact @ exact.T).cpu().numpy()
    searched = min(kmax, profile.spectral_cap)
    orders = orderings(t, samples, seed, max([searched, *sizes])).numpy()
    circuits = reduce_prefixes(
        exact, gram, orders, profile.m, searched, scale.zero_line,
        _may_be_zero(profile, loose, tau / BAND_FACTOR, scale),
    )  # fmt: skip
    proofs = find_proofs(exact, profile, circuits, scale, options)
    decider = Decider(
        exact, gram, orders, scale, proofs, null_key(data, scaling, samples, seed),
        null or cached_null, general_position_samples,
    )  # fmt: skip
    if decide:
        decider.prepare(sizes)
    return KruskalBand(profile, strict, loose, scale, proofs, tuple(circuits), decider)


def _may_be_zero(
    profile: KruskalProfile, loose: KruskalProfile, loose_rtol: float, scale: ErrorScale
) -> np.ndarray:
    """Orderings whose dependent prefix may lie under the zero line: all, unless τ/10 stands
    above the (widest) zero line, then those whose prefix is not independent at τ/10."""
    if loose_rtol <= scale.zero_line:
        return np.ones(profile.m.size, dtype=bool)
    return loose.m < profile.m + 1


def spectral_zero(x: torch.Tensor, scale: ErrorScale) -> tuple[int, torch.Tensor]:
    """The largest k for which some k-subset may clear the zero line, and X's singular values.

    A k-subset A has σ_min(A) ≤ σ_k(X) (interlacing) and a largest row norm at least N_k, the
    k-th smallest of X's: σ_k(X) ≤ ERROR_FACTOR·δ·N_k puts every k-subset under its zero line.
    """
    singular = torch.linalg.svdvals(x)
    kmax = min(x.shape)
    norms = torch.sort(torch.linalg.vector_norm(x, dim=1)).values[:kmax]
    excluded = torch.nonzero(singular[:kmax] <= scale.zero_line * norms).flatten()
    return (int(excluded[0]) if excluded.numel() else kmax), singular


def find_proofs(
    x: torch.Tensor,
    profile: KruskalProfile,
    circuits: Sequence[Circuit],
    scale: ErrorScale,
    options: Mapping,
) -> tuple[Proof, ...]:
    """Exact bounds on the Kruskal rank at the decision scale, smallest first."""
    proofs = []
    pairs = profile.pairs
    if pairs.zero_rows:
        proofs.append(Proof("zero vector", 1, f"{pairs.zero_rows} zero queries"))
    if pairs.duplicate_pairs:
        proofs.append(Proof("identical pair", 2, f"{pairs.duplicate_pairs} identical pairs"))
    elif pairs.dependent_pairs:  # dependent at τ: are any dependent within the error?
        line = scale.zero_lines(np.sqrt(2.0)).item()  # a pair's concentration is at most √2
        tight = pair_statistics(x, line, options.get("near_duplicate_cosine", 0.999))
        if tight.dependent_pairs:
            proofs.append(Proof(
                "dependent pair", 2, f"{tight.dependent_pairs} pairs dependent within the "
                f"error (σ_min/σ_max ≤ {line:.1e})", tight.example or (),
            ))  # fmt: skip
    proofs += [
        Proof("circuit" if c.minimal else "dependent set", c.size,
              f"{c.kind}, σ_min/σ_max = {c.ratio:.1e} ≤ {c.zero_line:.1e}", c.indices)
        for c in circuits
    ]  # fmt: skip
    cap, singular = spectral_zero(x, scale)
    if cap < min(x.shape):
        ratio = float(singular[cap] / singular[0])
        proofs.append(Proof(
            "spectrum", cap + 1,
            f"σ_{cap + 1}(X)/σ_max(X) = {ratio:.1e}: every {cap + 1}-subset is dependent within "
            "the error",
        ))  # fmt: skip
    return tuple(sorted(proofs, key=lambda p: p.size))
