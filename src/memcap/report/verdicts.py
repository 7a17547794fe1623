"""Pass / fail / inconclusive verdicts on the capacity theorems' assumptions, per model × layer.

Pure functions of the numbers the assumptions stage measured. A failure is only declared on
evidence that proves it (a rank-deficient context, a dependent subset of queries, or n > d);
a pass drawn from random subsets is stated with its sampling bound (rule of three: no failure
in S draws puts the failing fraction below 3/S with 95% confidence).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

# Fewer random subsets than this cannot support a pass (3/S would exceed 10%).
MIN_SUBSETS = 30
# A context margin (log10 of smallest singular value over the rank tolerance) below this is
# too close to the tolerance for its full-rank call to be trusted.
MIN_MARGIN_DECADES = 1.0


class Verdict(StrEnum):
    """Outcome of one check."""

    PASS = "pass"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class LayerEvidence:
    """What the assumptions stage measured on one model × layer.

    Attributes:
        context_full_rank_frac: fraction of the checked contexts with rank n.
        contexts_checked: number of contexts whose rank was computed.
        worst_margin: log10(σ_min / tolerance) of the worst context; None when not measured.
        kruskal_p_n: fraction of random n-subsets of queries that are linearly independent.
        general_position_p_d: the same for d-subsets (general position).
        kruskal_rank_estimate: largest k with P(k) = 1 in the profile.
        samples: random subsets drawn per k.
        rank_upper_bound: Kruskal rank bound proved by a certificate (a dependent pair or
            subset, the spectrum); None when not measured.
        certificate: kind of the certificate behind ``rank_upper_bound``.
        duplicate_pairs: pairs of bitwise identical query vectors.
        profile: P(k) for every k probed.
        dependent_bounds: per k, upper confidence bound on the fraction of dependent k-subsets.
    """

    model: str
    layer: str
    T: int
    n: int
    d: int
    samples: int
    context_full_rank_frac: float
    kruskal_p_n: float
    general_position_p_d: float
    kruskal_rank_estimate: int | None
    contexts_checked: int | None = None
    worst_margin: float | None = None
    rank_upper_bound: int | None = None
    certificate: str = ""
    duplicate_pairs: int | None = None
    profile: Mapping[int, float] = field(default_factory=dict)
    dependent_bounds: Mapping[int, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Check:
    """One assumption's verdict with the numbers behind it and the reason in words."""

    name: str
    verdict: Verdict
    evidence: str
    reason: str


@dataclass(frozen=True)
class TheoremReading:
    """What the checks mean for Theorem 1 on this layer.

    Attributes:
        verdict: pass when the H(n−1)+1 bound applies at the layer's n, fail when it applies
            at no n, inconclusive when the checks cannot decide (or it applies at a smaller n).
        n_applicable: the context size at which the hypotheses hold, or None.
        text: one or two sentences for the reader.
    """

    verdict: Verdict
    n_applicable: int | None
    text: str

    def bound(self, heads: int) -> int | None:
        """Theorem 1's lower bound H(n−1)+1 at ``n_applicable`` (None when it does not apply)."""
        return None if self.n_applicable is None else heads * (self.n_applicable - 1) + 1


@dataclass(frozen=True)
class LayerVerdicts:
    """Every check of one model × layer."""

    evidence: LayerEvidence
    contexts: Check
    kruskal: Check
    general_position: Check
    theorem: TheoremReading


def _missing(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _sampling_bound(ev: LayerEvidence, k: int) -> str:
    """Upper bound on the fraction of dependent k-subsets: the stage's, else the rule of three."""
    bound = ev.dependent_bounds.get(k)
    if _missing(bound):
        return f"≤ {min(1.0, 3 / ev.samples):.1%} of {k}-subsets dependent (rule of three, 95%)"
    return f"≤ {bound:.1%} of {k}-subsets dependent (upper confidence bound)"


def context_rank_check(ev: LayerEvidence) -> Check:
    """Assumption 2: every context matrix E_t (n × d) has rank n."""
    name = "Assumption 2 — contexts have rank n"
    if ev.n > ev.d:
        return Check(
            name,
            Verdict.FAIL,
            f"n = {ev.n} > d = {ev.d}",
            "an n × d matrix has rank at most d < n, so no context can have rank n",
        )
    if _missing(ev.context_full_rank_frac):
        return Check(name, Verdict.INCONCLUSIVE, "not measured", "no context rank was computed")
    checked = f" of {ev.contexts_checked}" if ev.contexts_checked else ""
    margin = "" if _missing(ev.worst_margin) else f"; worst margin {ev.worst_margin:.2f} decades"
    evidence = f"{ev.context_full_rank_frac:.1%}{checked} contexts full rank{margin}"
    if ev.context_full_rank_frac < 1.0:
        return Check(name, Verdict.FAIL, evidence, "some contexts are rank-deficient (rank < n)")
    if not _missing(ev.worst_margin) and ev.worst_margin < MIN_MARGIN_DECADES:
        return Check(
            name,
            Verdict.INCONCLUSIVE,
            evidence,
            f"every context is full rank, but the worst lies within {MIN_MARGIN_DECADES:g} "
            "decade of the rank tolerance: the call depends on the tolerance",
        )
    return Check(name, Verdict.PASS, evidence, "every checked context has rank n")


def _subset_check(name: str, k: int, k_label: str, p: float, ev: LayerEvidence) -> Check:
    """Shared logic of Assumption 1 (k = n) and general position (k = d)."""
    if k > ev.d:
        return Check(
            name,
            Verdict.FAIL,
            f"{k_label} = {k} > d = {ev.d}",
            f"more than d vectors in R^d are always dependent, so the Kruskal rank is < {k}",
        )
    sampled = "" if _missing(p) else f"P({k_label}) = {p:.3f} over {ev.samples} subsets"
    estimate = (
        "" if ev.kruskal_rank_estimate is None else f"Kruskal rank ≈ {ev.kruskal_rank_estimate}"
    )
    if ev.rank_upper_bound is not None and ev.rank_upper_bound < k:
        how = f" ({ev.certificate.replace('_', ' ')})" if ev.certificate else ""
        certified = f"certified Kruskal rank ≤ {ev.rank_upper_bound}{how}"
        if ev.duplicate_pairs:
            certified += f"; {ev.duplicate_pairs} pairs of identical queries"
        return Check(
            name,
            Verdict.FAIL,
            "; ".join(part for part in (sampled, certified) if part),
            f"a certificate proves that some {k_label}-subset of queries is linearly dependent",
        )
    if k > ev.T:
        return Check(
            name,
            Verdict.INCONCLUSIVE,
            f"T = {ev.T} < {k_label} = {k}",
            f"fewer queries than {k_label}: no {k_label}-subset exists to test",
        )
    if not sampled:
        return Check(name, Verdict.INCONCLUSIVE, "not measured", "no subset was drawn")
    evidence = "; ".join(part for part in (sampled, estimate) if part)
    if p < 1.0:
        return Check(
            name,
            Verdict.FAIL,
            evidence,
            f"a linearly dependent {k_label}-subset of queries was found, "
            f"which proves Kruskal rank < {k}",
        )
    if ev.samples < MIN_SUBSETS:
        return Check(
            name,
            Verdict.INCONCLUSIVE,
            evidence,
            f"no dependent subset among only {ev.samples} draws (< {MIN_SUBSETS}): too few to say",
        )
    return Check(
        name,
        Verdict.PASS,
        evidence,
        f"every sampled {k_label}-subset is independent ({_sampling_bound(ev, k)})",
    )


def kruskal_check(ev: LayerEvidence) -> Check:
    """Assumption 1: the queries have Kruskal rank ≥ n (every n of them are independent)."""
    return _subset_check("Assumption 1 — Kruskal rank ≥ n", ev.n, "n", ev.kruskal_p_n, ev)


def general_position_check(ev: LayerEvidence) -> Check:
    """General position: Kruskal rank ≥ d (the classical, stronger assumption)."""
    return _subset_check(
        "General position — Kruskal rank ≥ d", ev.d, "d", ev.general_position_p_d, ev
    )


def largest_supported_n(ev: LayerEvidence, min_samples: int = MIN_SUBSETS) -> int | None:
    """Largest k in [2, min(n, d)] at which Assumption 1 still holds, or None.

    That is the largest k with P(k) = 1 in the profile, capped by the Kruskal rank estimate and
    by any certified upper bound (a dependent pair, say, rules out every k ≥ 2).
    """
    if ev.samples < min_samples:
        return None
    caps = [ev.n, ev.d]
    caps += [c for c in (ev.kruskal_rank_estimate, ev.rank_upper_bound) if c is not None]
    supported = [
        k for k, p in ev.profile.items() if 2 <= k <= min(caps) and not _missing(p) and p >= 1.0
    ]
    return max(supported, default=None)


def theorem_reading(ev: LayerEvidence, contexts: Check, kruskal: Check) -> TheoremReading:
    """Whether, and at which n, Theorem 1's H(n−1)+1 bound applies to the layer.

    A failed check at the layer's n rules the bound out there; when only Assumption 1 fails
    and the P(k) profile shows every sampled k-subset independent for some k < n, the bound
    still holds for contexts cut to k tokens, which ``n_applicable`` reports.
    """
    if contexts.verdict is Verdict.PASS and kruskal.verdict is Verdict.PASS:
        return TheoremReading(
            Verdict.PASS,
            ev.n,
            f"Both assumptions hold at n = {ev.n}: one attention layer with H heads and "
            f"d_h ≥ {ev.n} memorizes at least H·{ev.n - 1} + 1 of these examples.",
        )
    if contexts.verdict is Verdict.FAIL:
        return TheoremReading(
            Verdict.FAIL, None, f"Theorem 1 does not apply to this layer: {contexts.reason}."
        )
    if kruskal.verdict is Verdict.FAIL:
        k = largest_supported_n(ev) if contexts.verdict is Verdict.PASS else None
        if k is not None and k < ev.n:
            return TheoremReading(
                Verdict.FAIL,
                k,
                f"Theorem 1 does not apply at n = {ev.n}; Assumption 1 holds up to k = {k}, "
                f"so the bound H·{k - 1} + 1 applies to contexts cut to {k} tokens.",
            )
        return TheoremReading(
            Verdict.FAIL, None, f"Theorem 1 does not apply to this layer: {kruskal.reason}."
        )
    undecided = [
        c.name.split(" — ")[0] for c in (contexts, kruskal) if c.verdict is not Verdict.PASS
    ]
    return TheoremReading(
        Verdict.INCONCLUSIVE,
        None,
        f"Undecided at n = {ev.n}: {' and '.join(undecided)} could not be settled by this run.",
    )


def layer_verdicts(ev: LayerEvidence) -> LayerVerdicts:
    """All three checks of one model × layer and their reading for Theorem 1."""
    contexts = context_rank_check(ev)
    kruskal = kruskal_check(ev)
    return LayerVerdicts(
        evidence=ev,
        contexts=contexts,
        kruskal=kruskal,
        general_position=general_position_check(ev),
        theorem=theorem_reading(ev, contexts, kruskal),
    )
