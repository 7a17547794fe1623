"""Structure in a query set, named by detection: why its vectors are less independent than
random data, or dependent by construction.

Each detector reads the stored values (and the extraction's record of its inputs) and
returns a :class:`Structure` with its numbers, or None:

* **LayerNorm centring**: every query orthogonal to the all-ones vector within the measured
  error (a LayerNorm without affine, at initialisation γ = 1, β = 0): rank ≤ d − 1, so general
  position is impossible by construction;
* **dominant shared component**: the mean query's direction holds at least DOMINANT_SHARE
  of the energy T·‖μ‖²/‖X‖_F²; the centred set's rank (at the measured error) and the number
  of directions that hold 90% of its variance are reported beside it;
* **too few distinct inputs**: fewer distinct photographs or documents than examples, or
  identical token windows;
* **identical queries**: bitwise repeats (all T identical: the query token does not depend
  on the input at this layer).

:func:`explain` names, for a check that fails or is too close to call, its proof, the
structures behind it, or else the spectrum that makes the queries less independent than random
data: no such check is left without a mechanism.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memcap.assumptions.mechanisms import all_queries_identical, query_duplicates
from memcap.numerics import Outcome
from memcap.numerics.decision import Reading, SizeDecision
from memcap.numerics.error import ErrorScale

# The mean direction's share of the energy at or above which it is named.
DOMINANT_SHARE = 0.9
# The share of the centred variance whose number of directions is reported.
VARIANCE_SHARE = 0.9


@dataclass(frozen=True)
class Structure:
    """A structure detected in a layer's queries.

    Attributes:
        name: what it is (one of the detectors' names).
        detail: its numbers, in words.
        bound: the Kruskal rank it forces by construction (None: it forces none).
    """

    name: str
    detail: str
    bound: int | None = None

    @property
    def text(self) -> str:
        return f"{self.name}: {self.detail}"


@dataclass(frozen=True)
class Spectrum:
    """How the queries' energy spreads: the shared mean and the centred set."""

    shared_share: float  # T·‖μ‖² / ‖X‖_F²
    centred_rank: int  # rank of X − 1μᵀ: singular values above the measured error's noise
    centred_k90: int  # directions holding VARIANCE_SHARE of the centred variance
    d: int

    @property
    def text(self) -> str:
        return (
            f"the mean query holds {self.shared_share:.2%} of the energy; the centred set has "
            f"rank {self.centred_rank} of {self.d}, {VARIANCE_SHARE:.0%} of its variance in "
            f"{self.centred_k90} directions"
        )


def layernorm_centring(queries: np.ndarray, error: ErrorScale) -> Structure | None:
    """Every nonzero query orthogonal to the all-ones vector within the zero line."""
    q = np.asarray(queries, dtype=np.float64)
    norms = np.linalg.norm(q, axis=1)
    nonzero = norms > 0
    if q.shape[1] < 2 or not nonzero.any():
        return None
    cosine = np.abs(q[nonzero].sum(axis=1)) / (np.sqrt(q.shape[1]) * norms[nonzero])
    worst = float(cosine.max())
    if worst > error.zero_line:
        return None
    d = q.shape[1]
    return Structure(
        "LayerNorm centring",
        f"every query is orthogonal to the all-ones vector (|Σx|/(√d·‖x‖) ≤ {worst:.1e}, under "
        f"the measured error's zero line {error.zero_line:.1e}): rank ≤ d − 1 = {d - 1}, so "
        "general position is impossible by construction",
        d - 1,
    )


def spectrum(queries: np.ndarray, error: ErrorScale) -> Spectrum:
    """The shared mean's energy share and the centred set's rank and 90%-variance directions."""
    q = np.asarray(queries, dtype=np.float64)
    total = float((q * q).sum())
    mean = q.mean(axis=0)
    share = float(len(q) * (mean @ mean) / total) if total > 0 else 0.0
    singular = np.linalg.svd(q - mean, compute_uv=False)
    energy = singular**2
    if energy.sum() == 0:
        return Spectrum(share, 0, 0, q.shape[1])
    # independent noise of δ·‖x‖ per vector moves the singular values of a T × d set by about
    # δ·max‖x‖·(1 + √(T/d)): the zero line covers a factor of 2 of that growth
    t, d = q.shape
    noise = (
        error.zero_line
        * float(np.linalg.norm(q, axis=1).max())
        * max(1.0, (1 + (t / d) ** 0.5) / 2)
    )
    rank = int((singular > noise).sum())
    k90 = int(np.searchsorted(np.cumsum(energy) / energy.sum(), VARIANCE_SHARE) + 1)
    return Spectrum(share, rank, min(k90, len(singular)), q.shape[1])


def dominant_component(found: Spectrum) -> Structure | None:
    """The shared mean, named when it holds at least DOMINANT_SHARE of the energy."""
    if found.shared_share < DOMINANT_SHARE:
        return None
    return Structure("dominant shared component", found.text)


def distinct_inputs(extraction: Mapping[str, Any]) -> Structure | None:
    """Fewer distinct photographs or documents than examples, or repeated token windows."""
    audit = extraction.get("input_audit") or {}
    t = int(extraction.get("T") or audit.get("examples") or 0)
    photographs = extraction.get("source_images")
    if photographs and len(photographs) < t:
        how = "crops, flips and mosaics" if extraction.get("crops") else "repeats"
        return Structure(
            "too few distinct inputs", f"{t} examples are {how} of {len(photographs)} photographs"
        )
    repeated = int(audit.get("identical_windows") or 0)
    documents = audit.get("distinct_documents")
    if repeated or (documents is not None and int(documents) < t):
        parts = [f"{t} examples from {documents} documents"] if documents is not None else []
        if repeated:
            parts.append(f"{repeated} pairs of identical token windows")
        return Structure("too few distinct inputs", "; ".join(parts))
    return None


def identical_queries(queries: np.ndarray, layer: str) -> Structure | None:
    """Bitwise repeated queries (Kruskal rank ≤ 1)."""
    groups = query_duplicates(queries)
    if not groups:
        return None
    if all_queries_identical(queries):
        detail = (
            f"all {len(queries)} queries are one vector: the query token does not depend on the "
            f"input at layer {layer}"
        )
    else:
        repeats = sum(len(g) - 1 for g in groups)
        detail = f"{repeats} queries repeat an earlier one ({len(groups)} groups)"
    return Structure("identical queries", detail, 1)


def detect(
    queries: np.ndarray, error: ErrorScale, extraction: Mapping[str, Any], layer: str
) -> tuple[list[Structure], Spectrum]:
    """Every structure detected in the layer's queries, and their spectrum."""
    found = spectrum(queries, error)
    named = [
        layernorm_centring(queries, error),
        dominant_component(found),
        distinct_inputs(extraction),
        identical_queries(queries, layer),
    ]
    return [s for s in named if s is not None], found


def explain(
    decision: SizeDecision | None,
    outcome: str,
    structures: Sequence[Structure],
    spectrum: Spectrum,
) -> str:
    """Why a Kruskal or general-position check fails, is too close to call, or reads less
    independent than random data ("" otherwise): its proof, the structures that explain it,
    else the spectrum that makes the queries less independent than random data."""
    less = decision is not None and decision.reading is Reading.LESS
    if outcome not in (Outcome.DOES_NOT_APPLY.value, Outcome.TOO_CLOSE.value) and not less:
        return ""
    named = {found.name: found for found in structures}
    parts = []
    proof = decision.proof if decision is not None else None
    if proof is not None:
        if proof.kind == "spectrum" and "LayerNorm centring" in named:
            return named["LayerNorm centring"].text
        if proof.kind == "identical pair" and "identical queries" in named:
            return named["identical queries"].text
    parts += [
        named[name].text
        for name in ("dominant shared component", "too few distinct inputs", "identical queries")
        if name in named
    ]
    if parts:  # the structures behind it (its proof is stated beside)
        if "dominant shared component" not in named:
            parts.append(f"concentrated spectrum: {spectrum.text}")
        return "; ".join(parts)
    if proof is not None:
        return f"{proof.kind}: {proof.detail}"
    return f"concentrated spectrum: {spectrum.text}"
