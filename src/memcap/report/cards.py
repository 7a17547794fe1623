"""The per-layer cards of the assumptions section: failing examples, certified capacity and
caveats beside the stage's verdicts."""

from __future__ import annotations

import pandas as pd

from memcap.assumptions.verdicts import MIN_SUBSETS
from memcap.capacity.ceiling import ceiling_reading, shared_reading
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
    shared context, beside H(n−1)+1 and the bound the verdicts allow.

    Each row says whether the own-context rank measures the embeddings or sits at its ceiling
    min(T, H·d), and whether the shared-context rank reaches min(T, H(n−1)+1).
    """
    ev = section.verdicts.evidence
    rows = capacity[
        (capacity["model"].astype(str) == ev.model) & (capacity["layer"].astype(str) == ev.layer)
    ]
    contexts = rows["contexts"] if "contexts" in rows else pd.Series("own", index=rows.index)
    own = rows[contexts == "own"].sort_values("H")
    shared = rows[contexts == "shared"].sort_values("H")
    if own.empty:
        return
    heads = own["H"].to_numpy()
    table = pd.DataFrame({"H": heads, "own contexts": own["certified"].to_numpy()})
    if "T" in own:
        table["examples used"] = own["T"].to_numpy()
        section.capacity_saturated = bool((own["certified"] >= own["T"]).all())
        sizes = zip(own["certified"], own["T"], heads, strict=True)
        table["own: reading"] = [ceiling_reading(int(c), int(t), int(h), ev.d) for c, t, h in sizes]
    if len(shared) == len(own):
        table["one shared context"] = shared["certified"].to_numpy()
        sizes = zip(shared["certified"], shared["T"], heads, strict=True)
        table["shared: reading"] = [
            shared_reading(int(c), int(t), int(h), ev.n) for c, t, h in sizes
        ]
    table[f"H(n−1)+1, n = {ev.n}"] = heads * (ev.n - 1) + 1
    table["bound Theorem 1 grants here"] = [section.verdicts.theorem.bound(int(h)) for h in heads]
    section.capacity = Table.from_frame(table)
