"""The two checks of one layer: tables and JSON-able records (no I/O).

Per layer: a Kruskal profile table (P(k) for every k, with confidence bounds) and a
per-context rank table, with their summaries (kruskal.json, context_rank.json), built by
:mod:`memcap.assumptions.records`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
import pandas as pd

from memcap.assumptions import mechanisms, structure
from memcap.assumptions.records import (
    MIN_SUBSETS,
    context_outcomes,
    context_record,
    context_table,
    kruskal_record,
    profile_table,
)
from memcap.assumptions.scales import LayerScales, layer_scales
from memcap.assumptions.settings import AssumptionsSettings
from memcap.numerics import ContextRanks, KruskalBand, Outcome
from memcap.numerics.band import NullSource


@dataclass(frozen=True)
class LayerChecks:
    """Both checks of one layer: the tables and the JSON-able records.

    ``failures`` has one row per failing example (example, check, mechanism, input);
    ``kruskal["applies_examples"]`` is the largest subset found on which both assumptions
    apply, and ``kruskal["subset"]`` says how it was found.
    """

    context_table: pd.DataFrame
    context: dict[str, Any]
    profile_table: pd.DataFrame
    kruskal: dict[str, Any]
    failures: pd.DataFrame


def check_layer(
    queries: np.ndarray,
    ranks: ContextRanks,
    n: int,
    settings: AssumptionsSettings,
    samples: int,
    device: Any,
    workers: int = 1,
    progress: bool = False,
    extraction: Mapping[str, Any] | None = None,
    layer: str = "",
    null: NullSource | None = None,
    contexts: np.ndarray | None = None,
) -> LayerChecks:
    """Assumption 2 from the context ranks the extraction streamed, Assumption 1 and general
    position from ``samples`` random orderings of the queries, each against the forward pass's
    measured error (:mod:`memcap.assumptions.scales`) and the random null (``null``: where it
    comes from, e.g. a cache), with today's τ band and paper A's raw rule beside them; the
    structure of the queries and why each failing example fails (``contexts``: the stored
    contexts, when the layer keeps them, to name a failing context's mechanism)."""
    extraction = extraction or {}
    ranks = settings.deciding(ranks)
    scales = layer_scales(extraction, settings.scaling)
    decide = (n, queries.shape[1])
    band = settings.band(
        queries, samples, device, workers, progress=progress, decide=decide,
        error=scales.queries, null=null,
    )  # fmt: skip
    raw = (
        band.profile
        if settings.scaling == "none"
        else settings.raw(queries, samples, device, workers)
    )
    outcomes = context_outcomes(ranks, scales.contexts)
    found = mechanisms.failures(queries, ranks, outcomes, extraction, layer, contexts)
    structures, spectrum = structure.detect(queries, scales.queries, extraction, layer)
    kruskal = kruskal_record(band, raw, n, settings.confidence)
    kruskal |= applicable_subset(
        queries, band, outcomes, found, n, settings, samples, device, workers, scales, null
    )
    kruskal["failure_mechanisms"] = mechanisms.mechanism_counts(found)
    kruskal["structural"] = _structural(structures, extraction, layer, queries.shape[1])
    kruskal["structure"] = [s.__dict__ for s in structures]
    kruskal["spectrum"] = spectrum.__dict__
    for key, k in (("n", n), ("d", queries.shape[1])):
        kruskal[f"mechanism_{key}"] = structure.explain(
            band.decision(k), kruskal[f"outcome_{key}"], structures, spectrum
        )
    if _rules_disagree(kruskal, ranks):
        kruskal["ill_conditioning"] = mechanisms.ill_conditioning(queries)
    table = profile_table(band.profile, settings.confidence)
    for name, other in (("p_strict", band.strict), ("p_loose", band.loose), ("p_paper_a", raw)):
        table[name] = other.p[1 : len(table) + 1]
    context = context_record(ranks, outcomes, scales.contexts)
    context["mechanism"] = mechanisms.context_mechanism_counts(found)
    return LayerChecks(
        context_table=context_table(ranks, outcomes, scales.contexts),
        context=context,
        profile_table=table,
        kruskal=kruskal,
        failures=pd.DataFrame(
            [asdict(f) for f in found], columns=[f.name for f in fields(mechanisms.Failure)]
        ),
    )


def _rules_disagree(kruskal: Mapping[str, Any], ranks: ContextRanks) -> bool:
    """Whether paper A's raw rule decides otherwise than ours: P(n) or P(d) on the queries,
    or the full-rank fraction of the contexts."""
    raw = kruskal["paper_a"]
    queries = any(
        not (math.isnan(raw[key]) and math.isnan(kruskal[key])) and raw[key] != kruskal[key]
        for key in ("p_n", "p_d")
    )
    contexts = ranks.raw is not None and bool((ranks.raw.full_rank != ranks.full_rank).any())
    return queries or contexts


def _structural(
    structures: list[structure.Structure], extraction: Mapping[str, Any], layer: str, d: int
) -> str:
    """Why a check of this layer cannot hold by construction for the architecture ("" if not)."""
    reasons = []
    why = mechanisms.structural(extraction, layer)
    if why:
        reasons.append(f"Assumption 2: {why}")
    for found in structures:
        if found.bound is not None:
            what = "General position" if found.bound >= d - 1 else "Assumption 1"
            reasons.append(f"{what}: {found.text}")
    return "; ".join(reasons)


def applicable_subset(
    queries: np.ndarray,
    band: KruskalBand,
    outcomes: list[Outcome],
    found: list[mechanisms.Failure],
    n: int,
    settings: AssumptionsSettings,
    samples: int,
    device: Any,
    workers: int,
    scales: LayerScales | None = None,
    null: NullSource | None = None,
) -> dict[str, Any]:
    """The largest subset found on which both assumptions apply: the examples whose context
    applies, less repeated and zero queries; its Kruskal band re-checked when the whole set's
    does not apply. A subset of Kruskal rank ≥ n keeps it in any subset of itself."""
    dropped = {f.example for f in found}
    keep = np.array([i for i in range(len(outcomes)) if i not in dropped], dtype=np.int64)
    k = min(n, len(keep))
    if k == 0:
        return {"applies_examples": 0, "subset": "no example's context applies"}
    if len(keep) < n and band.outcome(n, MIN_SUBSETS) is not Outcome.APPLIES:
        return {
            "applies_examples": 0,
            "subset": f"only {len(keep)} examples left (< n = {n}): no useful subset",
        }
    if band.outcome(n, MIN_SUBSETS) is Outcome.APPLIES:
        holds, how = True, "the whole set's Kruskal band applies"
    elif len(keep) == len(queries):
        holds, how = False, "no example to drop: Assumption 1 fails on the set itself"
    else:
        error = scales.queries if scales is not None else None
        sub = settings.band(
            queries[keep], samples, device, workers, decide=(k,), error=error, null=null
        )
        outcome = sub.outcome(k, MIN_SUBSETS) or Outcome.NOT_TESTED
        holds = outcome is Outcome.APPLIES
        how = f"Kruskal band re-checked on the {len(keep)} examples left: {outcome.value}"
    return {"applies_examples": int(len(keep)) if holds else 0, "subset": how}
