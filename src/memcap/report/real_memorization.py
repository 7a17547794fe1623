"""The report's section on memorization on the real embeddings, and each model's "achieved"
words for the first screen: what training memorized on its embeddings, beside the controls."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from memcap.report.context import Figure, RealMemorizationSection, Table
from memcap.report.loaders import read_table

ESTIMATES = ["model", "layer", "context", "task", "H", "bound"]
LAWS = ["model", "layer", "input", "curve", "notion", "outcome", "p_value", "power", "measured"]
CONTROLS = {
    "uniform": "uniform on [0, 1] as paper A draws them",
    "gaussian": "Gaussian with the real tokens' mean and covariance",
}
PAIRED = ["model", "layer", "context", "task", "H", "control", "seeds", "exact", "change",
          "p_holm", "outcome"]  # fmt: skip


def real_memorization_section(
    enabled: bool, figures: Sequence[Figure], table: Callable[[str], Path | None]
) -> RealMemorizationSection:
    """The section from the stage's tables (none read where the stage did not run)."""
    estimates = read_table(table("estimates")) if enabled else None
    laws = read_table(table("laws")) if enabled else None
    paired = read_table(table("paired")) if enabled else None
    if estimates is None or estimates.empty:
        return RealMemorizationSection(enabled, figures)
    return RealMemorizationSection(
        enabled,
        figures,
        estimates=Table.from_frame(side_by_side(estimates)),
        laws=None if laws is None or laws.empty else Table.from_frame(_laws(laws)),
        paired=None if paired is None or paired.empty else Table.from_frame(_paired(paired)),
        achieved={model: achieved(estimates, model) for model in estimates["model"].unique()},
        controls=controls(estimates),
    )


def controls(estimates: pd.DataFrame) -> str:
    """The controls the run trained, in words, in the order :data:`CONTROLS` lists them."""
    ran = set(estimates["input"])
    return " and ".join(words for kind, words in CONTROLS.items() if kind in ran)


def side_by_side(estimates: pd.DataFrame) -> pd.DataFrame:
    """One row per model, layer, context, task and H: each input's seed mean ± SE ("≥" where
    a seed is a lower bound) beside Theorem 1's H(n'−1)+1."""
    wide = estimates.pivot_table(
        index=ESTIMATES, columns="input", values="capacity_shown", aggfunc="first"
    ).reset_index()
    wide.columns.name = None
    return wide.rename(columns={"bound": "H(n'−1)+1"})


def achieved(estimates: pd.DataFrame, model: str) -> str:
    """What training memorized on ``model``'s embeddings: per layer, its first context and
    task, the real input's seed means over H, beside Theorem 1's count and each control."""
    rows = estimates[estimates["model"] == model]
    parts = []
    for layer, own in rows.groupby("layer", sort=False):
        context, task = own["context"].iloc[0], own["task"].iloc[0]
        curve = own[(own["context"] == context) & (own["task"] == task)].sort_values("H")
        by_input = {kind: group for kind, group in curve.groupby("input")}
        if "real" not in by_input:
            continue
        real = by_input["real"]
        hs = " / ".join(str(int(h)) for h in real["H"])
        counts = " / ".join(_count(row) for _, row in real.iterrows())
        bound = " / ".join(str(int(b)) for b in real["bound"])
        controls = "; ".join(
            f"{kind} " + " / ".join(_count(row) for _, row in group.iterrows())
            for kind, group in by_input.items()
            if kind != "real"
        )
        n, seeds = int(real["n"].iloc[0]), int(real["seeds"].iloc[0])
        parts.append(
            f"layer {layer}: {counts} at H = {hs} (n' = {n}, {context} context, {task}, "
            f"seed means of {seeds}; Theorem 1: {bound}{'; ' + controls if controls else ''})"
        )
    return "; ".join(parts)


def _count(row: pd.Series) -> str:
    """A setting's seed mean as the first screen shows it: "≥" where a seed is a lower bound,
    "(chance)" where every seed's count is at chance."""
    count = f"{row['capacity_mean']:.0f}"
    if str(row["capacity_shown"]).startswith("chance"):
        return f"{count} (chance)"
    return f"≥ {count}" if "≥" in str(row["capacity_shown"]) else count


def _laws(laws: pd.DataFrame) -> pd.DataFrame:
    return laws[[c for c in LAWS if c in laws]]


def _paired(paired: pd.DataFrame) -> pd.DataFrame:
    table = paired[[c for c in PAIRED if c in paired]].copy()
    table["change"] = table["change"].map(lambda v: f"{v:+.0%}" if pd.notna(v) else "—")
    return table
