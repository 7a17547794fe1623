"""The page's first answer, per model: what Theorem 1 grants at the model's own heads where it
applies (the depth strip says where), and what that rests on.

Theorem 1 (paper A) grants one attention layer of H heads with d_h ≥ n at least
min(T, H(n−1)+1) memorized examples where both assumptions hold; with d_h < n its construction
gives H(d_h−1)+1. The answer takes H and d_h from the extraction's provenance (the model's
heads per block) and states what the grant rests on: the
sampled n-subsets of the queries against the measured error (a sampled bound, not a proof),
the exact Kruskal rank bounds, and the contexts. Everything is read from the stage's outcomes.
"""

from __future__ import annotations

from collections.abc import Sequence

from memcap.assumptions.evidence import LayerEvidence
from memcap.assumptions.verdicts import Outcome
from memcap.numerics.error import CLEAR_DECADES
from memcap.numerics.statistics import upper_confidence_bound
from memcap.report.context import LayerSection, ModelAnswer, layers_by_model
from memcap.report.loaders import ModelInfo, layer_ranges
from memcap.theory import construction_count, theory_bound

LEVEL = 0.95  # the confidence of the bound on dependent n-subsets


def granted(T: int, H: int, n: int) -> int:
    """Theorem 1's min(T, H(n−1)+1)."""
    return min(T, int(theory_bound(H, n)))


def grant_words(model: ModelInfo | None, ev: LayerEvidence) -> tuple[str, str]:
    """The count at the model's own H and d_h: (the number, how it is computed with its cap T).
    With d_h ≥ n it is Theorem 1's min(T, H(n−1)+1); with the model's own d_h < n, the
    construction's min(T, H(d_h−1)+1) (:func:`memcap.theory.construction_count`), Theorem 1's
    count named as what heads with d_h ≥ n would get."""
    if model is None or model.H is None:
        return "—", "the extraction recorded no head count for this model (rerun it)"
    H, n, T = model.H, ev.n, ev.T
    if model.d_h is not None and model.d_h < n:
        d_h = model.d_h
        value = min(T, construction_count(H, n, d_h))
        text = (
            f"of {T} examples at the model's own H = {H} heads of d_h = {d_h} < n = {n}: the "
            f"construction's min({T}, {H}·{d_h - 1} + 1) (Theorem 1's H(n−1)+1 = "
            f"{int(theory_bound(H, n)):,} needs d_h ≥ {n})"
        )
    else:
        value = granted(T, H, n)
        text = f"of {T} examples: H = {H} heads, min({T}, {H}·{n - 1} + 1)"
    if value == T:
        text += "; capped by the examples used"
    return f"{value:,}", text


CLEAR = "a decade" if CLEAR_DECADES == 1 else f"{CLEAR_DECADES:g} decades"


def _subsets(ev: LayerEvidence) -> tuple[str, str]:
    """Assumption 1's sampled evidence at n on the measured error's scale (at τ for a summary
    that recorded no decision): (what was sampled, the bound on dependent n-subsets it gives)."""
    decided, n = ev.decisions.get("n", {}), ev.n
    if "clear" not in decided:
        independent = round(ev.kruskal_p_n * ev.samples)
        bound = upper_confidence_bound(ev.samples - independent, ev.samples, LEVEL)
        sampled = f"P({n}) = {ev.kruskal_p_n:.3g} over {ev.samples} random {n}-subsets at τ"
        return sampled, f"≤ {bound:.1%} of {n}-subsets dependent at τ ({LEVEL:.0%} bound)"
    samples, zero, clear = (int(decided.get(key) or 0) for key in ("samples", "zero", "clear"))
    bound = upper_confidence_bound(zero, samples, LEVEL)
    if clear == samples:
        sampled = (
            f"P({n}) = 1 over {samples} random {n}-subsets, each {CLEAR} clear of the measured "
            "error"
        )
    else:
        sampled = (
            f"P({n}) = {clear / samples:.3g}: {clear} of {samples} random {n}-subsets {CLEAR} "
            f"clear of the measured error, {zero} dependent within it (random data: "
            f"{int(decided.get('null_zero') or 0)})"
        )
    return sampled, f"≤ {bound:.1%} of {n}-subsets dependent ({LEVEL:.0%} bound)"


def rests_on(sections: Sequence[LayerSection]) -> tuple[str, ...]:
    """What the grant rests on: the sampled n-subsets (grouped over layers with the same
    numbers), the exact Kruskal rank bound, and the contexts."""
    evidence = [s.verdicts.evidence for s in sections]
    groups: dict[tuple[str, str], list[str]] = {}
    for ev in evidence:
        groups.setdefault(_subsets(ev), []).append(ev.layer)
    lines = [
        f"{sampled} at {_layers(layers)}: {bound}" for (sampled, bound), layers in groups.items()
    ]
    lower = [ev.rank_lower_bound for ev in evidence if ev.rank_lower_bound is not None]
    n = evidence[0].n
    if lower and min(lower) < n:
        lines.append(
            f"certified Kruskal rank only ≥ {min(lower)} (no zero query, no dependent pair): "
            f"Kruskal rank ≥ {n} is sampled evidence, not a proof"
        )
    unresolved = [(s.unresolved_ranks, s.verdicts.evidence.layer) for s in sections]
    open_ = [(k, of, layer) for (k, of), layer in unresolved if k]
    if open_:
        lines.append(
            "certified capacity on one shared context: "
            + ", ".join(
                f"{k} of {of} ranks not one number at {_layers([la])}" for k, of, la in open_
            )
            + " (each a range from its certified count up)"
        )
    checked = [ev for ev in evidence if ev.contexts_checked is not None]
    clear = [ev.context_counts.get(Outcome.APPLIES.value, 0) for ev in checked]
    if checked and all(c == ev.contexts_checked for c, ev in zip(clear, checked, strict=True)):
        lines.append(f"every context of the {checked[0].contexts_checked} {CLEAR} clear")
    elif checked:
        lines.append(
            "contexts "
            + ", ".join(
                f"{c} of {ev.contexts_checked} {CLEAR} clear at {_layers([ev.layer])}"
                for c, ev in zip(clear, checked, strict=True)
            )
        )
    return tuple(lines)


def _layers(layers: Sequence[str]) -> str:
    named = layer_ranges(layers).replace("random_attention", "RA")
    return f"layer{'s' if len(layers) > 1 else ''} {named}"


def model_answers(layers: Sequence[LayerSection], models: Sequence[ModelInfo]) -> list[ModelAnswer]:
    """Per model with checked layers, in page order: what Theorem 1 grants at the model's own
    H where it applies at the tested n, and what that rests on."""
    infos = {m.name: m for m in models}
    answers = []
    for model, ordered in layers_by_model(layers).items():
        holding = [s for s in ordered if s.verdicts.theorem.outcome is Outcome.APPLIES]
        if not holding:
            answers.append(ModelAnswer(model, "—", "Theorem 1 applies at no audited layer", ()))
            continue
        value, grants = grant_words(infos.get(model), holding[0].verdicts.evidence)
        answers.append(ModelAnswer(model, value, grants, rests_on(holding)))
    return answers
