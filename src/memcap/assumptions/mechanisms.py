"""Why a layer fails, per example: the mechanism behind each failing context or query.

A context fails (does not apply) on an exact proof — a row repeated or zero, n > d — or on a
small singular value, named from the stored context where the layer keeps it: a shared token
component (the mean token's share of the energy) or a concentrated span (the directions that
hold 90% of the centred energy). A repeated row has a cause the extraction records
(``positions``, :mod:`memcap.extract.positions`): where positions enter inside attention (a
relative bias: T5, Swin; a rotation: Llama) and not the residual stream, a repeated token gives
a repeated row at layer 0 and in an attention layer fed by it, by construction; under causal
attention equal leading tokens keep equal states at every layer. A query fails Assumption 1
when it repeats another query (the class token at layer 0 is the same vector for every input),
is zero, or the queries span fewer than n dimensions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memcap.extract.positions import inside_attention, repeated_rows
from memcap.numerics import ContextRanks, Outcome

# A coordinate (or a vector) whose RMS (norm) is at least this many times the median one is
# named as an outlier when paper A's raw rule and the equilibrated rule disagree.
OUTLIER_FACTOR = 10.0
MAX_NAMED = 5
# A context's mean token holding at least this share of its energy is named as shared.
SHARED_TOKEN_SHARE = 0.9


@dataclass(frozen=True)
class Failure:
    """One failing example of one check."""

    example: int
    check: str  # "context" or "query"
    outcome: str  # the check's outcome on this example
    mechanism: str  # one of a few categories, e.g. "repeated rows: identical leading tokens"
    detail: str  # the example's own numbers, e.g. "3 repeated rows"
    input: str  # the input it came from (document and window, image and crop)


def context_mechanism(
    ranks: ContextRanks,
    example: int,
    extraction: Mapping[str, Any],
    layer: str,
    contexts: np.ndarray | None = None,
) -> tuple[str, str]:
    """(mechanism, detail) of context ``example`` failing (does not apply or too close);
    ``contexts``: the stored (T, n, d) contexts, when the layer keeps them."""
    if ranks.n > ranks.d:
        return "n > d", f"n = {ranks.n} > d = {ranks.d}: rank at most d"
    zero = int(ranks.zero_rows[example]) if ranks.zero_rows is not None else 0
    repeated = int(ranks.repeated_rows[example]) if ranks.repeated_rows is not None else 0
    if zero:
        return "zero rows", f"{zero} zero rows"
    if repeated:
        return f"repeated rows: {_repeat_cause(example, extraction, layer)}", (
            f"{repeated} repeated rows"
        )
    ratio = (
        float(ranks.sigma_min[example] / ranks.sigma_max[example])
        if ranks.sigma_max[example]
        else 0.0
    )
    detail = f"σ_min/σ_max = {ratio:.1e}"
    if contexts is None:
        return "near-dependent tokens (contexts not stored at depth rows)", detail
    return span_mechanism(np.asarray(contexts[example], dtype=np.float64), detail)


def span_mechanism(context: np.ndarray, detail: str) -> tuple[str, str]:
    """What makes one (n, d) context nearly dependent: its shared token or its narrow span."""
    total = float((context * context).sum())
    mean = context.mean(axis=0)
    share = float(len(context) * (mean @ mean) / total) if total > 0 else 0.0
    energy = np.linalg.svd(context - mean, compute_uv=False) ** 2
    k90 = int(np.searchsorted(np.cumsum(energy) / max(energy.sum(), 1e-300), 0.9) + 1)
    spread = f"90% of the centred energy in {k90} of {len(context)} directions"
    if share >= SHARED_TOKEN_SHARE:
        return "shared token component", f"{detail}; the mean token holds {share:.1%}; {spread}"
    return "concentrated span", f"{detail}; {spread}"


def structural(extraction: Mapping[str, Any], layer: str) -> str | None:
    """Why the contexts of this layer cannot have rank n for every input, by construction, or
    None. A model without additive positions maps a repeated token to a repeated row at layer
    0, and the random attention layer keeps it (it reads the layer-0 embeddings)."""
    return repeated_rows(extraction.get("positions"), layer)


def _repeat_cause(example: int, extraction: Mapping[str, Any], layer: str) -> str:
    if structural(extraction, layer) is not None:
        return f"repeated tokens ({inside_attention(extraction.get('positions'))})"
    heads = extraction.get("example_tokens_head")
    if extraction.get("causal") and heads and len(heads[example]) > 1:
        head = heads[example]
        if head[0] == head[1]:
            return "identical leading tokens under causal attention"
    return "identical token states"


def query_duplicates(queries: np.ndarray) -> list[np.ndarray]:
    """Groups (of two or more) of bitwise identical query vectors, first index first."""
    _, inverse, counts = np.unique(queries, axis=0, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    return [np.flatnonzero(inverse == g) for g in np.flatnonzero(counts > 1)]


def query_failures(queries: np.ndarray, layer: str) -> dict[int, tuple[str, str]]:
    """Per failing query (not the first of its group): (mechanism, detail)."""
    failures: dict[int, tuple[str, str]] = {}
    for row in np.flatnonzero(~queries.any(axis=1)):
        failures[int(row)] = ("zero query vector", "")
    groups = query_duplicates(queries)
    if all_queries_identical(queries):
        what = (
            "identical query vectors: the query token's state does not depend on the input "
            f"at layer {layer} (e.g. a class token)"
        )
    else:
        what = "identical query vectors"
    for group in groups:
        for row in group[1:]:
            failures.setdefault(int(row), (what, f"same as example {int(group[0])}"))
    return failures


def all_queries_identical(queries: np.ndarray) -> bool:
    """Whether every query is the same vector (Kruskal rank ≤ 1 by construction)."""
    return len(queries) > 1 and bool((queries == queries[:1]).all())


def failures(
    queries: np.ndarray,
    ranks: ContextRanks,
    outcomes: Sequence[Outcome],
    extraction: Mapping[str, Any],
    layer: str,
    contexts: np.ndarray | None = None,
) -> list[Failure]:
    """Every failing example of a layer: contexts not applying, then repeated or zero queries."""
    inputs = extraction.get("example_inputs") or []
    label = (lambda i: inputs[i]) if len(inputs) == len(outcomes) else (lambda i: "")
    found = [
        Failure(
            i,
            "context",
            o.value,
            *context_mechanism(ranks, i, extraction, layer, contexts),
            label(i),
        )  # fmt: skip
        for i, o in enumerate(outcomes)
        if o is not Outcome.APPLIES
    ]
    found += [
        Failure(i, "query", Outcome.DOES_NOT_APPLY.value, *why, label(i))
        for i, why in sorted(query_failures(queries, layer).items())
    ]
    return found


def mechanism_counts(found: Sequence[Failure]) -> str:
    """The mechanisms in a few words with their counts, most frequent first."""
    counts = Counter(f"{f.check} ({f.outcome}): {f.mechanism}" for f in found)
    return "; ".join(f"{key} ×{count}" for key, count in counts.most_common())


def context_mechanism_counts(found: Sequence[Failure]) -> str:
    """The failing contexts' mechanisms with their counts, most frequent first."""
    return mechanism_counts([f for f in found if f.check == "context"])


def outliers(values: np.ndarray, what: str) -> str:
    """Coordinates (or vectors) of ``values`` at least OUTLIER_FACTOR times the median, named:
    "coordinate 99 (390× the median)"; "" when there are none."""
    if values.size == 0:
        return ""
    median = float(np.median(values))
    if median <= 0:
        return ""
    ratio = values / median
    top = [int(i) for i in np.argsort(-ratio) if ratio[i] >= OUTLIER_FACTOR][:MAX_NAMED]
    return ", ".join(f"{what} {i} ({ratio[i]:.0f}× the median)" for i in top)


def ill_conditioning(queries: np.ndarray) -> str:
    """The outlier coordinates and high-norm queries that make the raw rule's σ_max large."""
    q = queries.astype(np.float64)
    parts = [
        outliers(np.sqrt((q * q).mean(axis=0)), "coordinate"),
        outliers(np.linalg.norm(q, axis=1), "query"),
    ]
    return "; ".join(p for p in parts if p)
