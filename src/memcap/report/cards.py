"""The per-layer cards of the assumptions section: failing examples, certified capacity and
caveats beside the stage's verdicts."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from memcap.assumptions.verdicts import MIN_SUBSETS
from memcap.capacity.ceiling import (
    ceiling,
    gap_text,
    granted,
    own_reading,
    rank_text,
    shared_cap,
    shared_reading,
)
from memcap.report import loaders
from memcap.report.context import LayerSection, Table

SHOWN_FAILURES = 8  # failing examples listed in a layer's card


def layer_caveats(section: LayerSection, model: loaders.ModelInfo | None) -> list[str]:
    """What limits the reading of one layer: n > d, undersampling, general position untestable,
    saturated capacity, a failed input audit, the extraction's warnings and a tokenizer
    substitute."""
    ev = section.verdicts.evidence
    caveats = []
    if ev.n > ev.d:
        caveats.append(
            f"n = {ev.n} > d = {ev.d}: contexts cannot have rank n and n queries cannot be "
            "independent, so Theorem 1 cannot apply at this n."
        )
    if ev.samples < MIN_SUBSETS:
        caveats.append(f"only {ev.samples} random subsets per k (< {MIN_SUBSETS}).")
    if ev.d > ev.T:
        caveats.append(f"T = {ev.T} < d = {ev.d}: general position cannot be tested.")
    if section.capacity_saturated:
        caveats.append(
            "the certified capacity equals the number of examples it was computed on at every "
            "H: it is capped by T, not by the layer (raise T or capacity.max_T to see it "
            "grow with H)."
        )
    if model is not None:
        if not model.input_audit_passed:
            caveats.append(f"input audit: {model.input_audit}.")
        caveats.extend(model.warnings)
        substitute = model.tokenizer_substitute
        if substitute and not any(substitute in warning for warning in model.warnings):
            caveats.append(f"tokenizer substitute: {substitute}.")
    return caveats


def layer_notes(section: LayerSection) -> list[str]:
    """Structure found in one layer's queries that explains its outcome (not a limitation of
    the run): identical query vectors."""
    ev = section.verdicts.evidence
    if ev.duplicate_pairs and ev.duplicate_pairs == ev.T * (ev.T - 1) // 2:
        return [
            f"all {ev.T} query vectors are identical: at this layer the query token does not "
            "depend on the input (e.g. a [CLS] or first-position embedding before any "
            "attention), so no two queries are independent."
        ]
    if ev.duplicate_pairs:
        return [
            f"{ev.duplicate_pairs} pairs of identical query vectors (repeated inputs or tokens)."
        ]
    return []


def add_failures(section: LayerSection, path: str | None) -> None:
    """The layer's first failing examples (input, check, mechanism) from the stage's table."""
    table = loaders.read_table(path)
    if table is None or table.empty:
        return
    section.failures_path = path
    section.failures_count = len(table)
    shown = table.head(SHOWN_FAILURES)[
        ["example", "input", "check", "outcome", "mechanism", "detail"]
    ]
    section.failures = Table.from_frame(shown.fillna(""))


def add_capacity(section: LayerSection, capacity: pd.DataFrame) -> None:
    """The layer's certified capacity per H, each example with its own context and with one
    shared context, beside min(T, H(n−1)+1) and what Theorem 1 grants at the verdicts' n.

    Each rank runs from the count the measured forward error certifies up to the most Z's
    shape allows, one number where they meet; its gap is set against that floor, and each row
    says whether it sits at a ceiling, at H(n−1)+1, or measures the embeddings. The
    shared rank is the first shared context's first draw, its spread over every shared context
    and draw beside it. Every capacity shown as granted is at most T.
    """
    ev = section.verdicts.evidence
    rows = capacity[
        (capacity["model"].astype(str) == ev.model) & (capacity["layer"].astype(str) == ev.layer)
    ]
    contexts = rows["contexts"] if "contexts" in rows else pd.Series("own", index=rows.index)
    own = rows[contexts == "own"].sort_values("H")
    shared = rows[contexts == "shared"]
    for column in ("shared_context", "draw"):  # the first shared context's first draw
        if column in shared:
            shared = shared[shared[column] == 0]
    shared = shared.sort_values("H")
    if own.empty:
        return
    H_values = own["H"].to_numpy()
    T_values = own["T"].to_numpy() if "T" in own else np.full(len(own), ev.T)
    read = {"rank_low", "rank_high", "floor", "T", "n", "d"} <= set(rows.columns)
    table = pd.DataFrame({"H": H_values, "examples used": T_values})
    table["own contexts"] = _ranks(own, read, shared=False)
    section.capacity_saturated = bool((own["certified"].to_numpy() >= T_values).all())
    if read:
        table["own: gap"] = [_gap(r) for r in own.itertuples()]
        table["own: reading"] = [
            own_reading(*_edge(r), int(r.T), int(r.H), int(r.d)) for r in own.itertuples()
        ]
    if len(shared) == len(own):
        table["one shared context"] = _ranks(shared, read, shared=True)
        if read:
            resolved = shared["rank_low"] == shared["rank_high"]
            section.unresolved_ranks = (int((~resolved).sum()), len(shared))
        if read:
            table["shared: gap"] = [_gap(r) for r in shared.itertuples()]
            table["shared: reading"] = [
                shared_reading(
                    *_edge(r), int(r.T), int(r.H), int(r.n), int(r.d), *_repeats(r)
                )  # fmt: skip
                for r in shared.itertuples()
            ]
        if "spread_runs" in shared:
            table["shared: median [range] over contexts × draws"] = [
                _spread(r) for r in shared.itertuples()
            ]
    table[f"min(T, H(n−1)+1), n = {ev.n}"] = [
        granted(int(t), int(h), ev.n) for t, h in zip(T_values, H_values, strict=True)
    ]
    table["bound Theorem 1 grants here"] = [
        None if section.verdicts.theorem.n_applicable is None
        else granted(int(t), int(h), section.verdicts.theorem.n_applicable)
        for t, h in zip(T_values, H_values, strict=True)
    ]  # fmt: skip
    section.capacity = Table.from_frame(table)


def _repeats(row: Any) -> tuple[int | None, str | None]:
    """A shared row's distinct context rows and why they repeat (None where not recorded)."""
    distinct = getattr(row, "shared_distinct_rows", None)
    cause = getattr(row, "repeat_cause", None)
    return (
        None if distinct is None or pd.isna(distinct) else int(distinct),
        cause if isinstance(cause, str) and cause else None,
    )


def _ranks(rows: pd.DataFrame, read: bool, shared: bool) -> list[str]:
    """Each row's rank from its certified count up to the most its shape allows, one number
    where resolved (the count alone without the reading's columns)."""
    if not read:
        return [str(int(c)) for c in rows["certified"]]
    caps = [
        shared_cap(int(r.T), int(r.H), int(r.n), int(r.d), _repeats(r)[0])
        if shared
        else ceiling(int(r.T), int(r.H), int(r.d))
        for r in rows.itertuples()
    ]
    return [
        rank_text(int(r.rank_high), cap, r.rank_low == r.rank_high)
        for r, cap in zip(rows.itertuples(), caps, strict=True)
    ]


def _edge(row: Any) -> tuple[int, int]:
    """rank_low and rank_high of one table row."""
    return int(row.rank_low), int(row.rank_high)


def _gap(row: Any) -> str:
    return gap_text(float(row.last_kept), float(row.first_dropped), float(row.floor))


def _spread(row: Any) -> str:
    if pd.isna(row.spread_runs):
        return ""
    runs, resolved = int(row.spread_runs), int(row.spread_resolved)
    return (
        f"{row.spread_median:g} [{int(row.spread_min)}–{int(row.spread_max)}] of {runs}; "
        f"{resolved} resolved"
    )
