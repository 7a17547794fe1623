"""A paper's scaling-law section of the report: its laws decided on seeds, their figures with the
outcomes in the captions, the capacity estimates and the caveats.

The laws come decided (``laws.csv`` of the stage: outcome, test, statistic, p-value, Holm's
adjusted p-value, and beside an inconclusive test its power and the seeds 80% power would need,
per law and curve, :mod:`memcap.laws`); this module only arranges them: a compact verdict
table, the full table behind it, each figure's caption completed with the outcomes of the laws
it draws, "Not reproduced in this run" naming only the laws whose test fails (with any caveat
on the verdict), the inconclusive and untestable ones apart, and a note on multiplicity. A
p-value at a permutation test's floor (``p_floor``) is shown as "≤ floor".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import pandas as pd

from memcap.report import caveats
from memcap.report.context import Figure, ScalingSection, Table
from memcap.report.render import format_number

TableFile = Callable[[str], "Path | None"]
VERDICT_COLUMNS = [
    "law", "sweep", "curve", "outcome", "comparison", "test", "statistic", "p_value", "p_holm",
    "power", "seeds_needed",
]  # fmt: skip
# The full table: what the compact one does not show (its columns without any value dropped).
FULL_COLUMNS = [
    "law", "sweep", "curve", "criterion", "measured", "outcome", "p_unweighted", "power_at",
    "caveat",
]  # fmt: skip
# How the compact table heads the columns a reader would not guess.
HEADERS = {"p_holm": "p (Holm)", "seeds_needed": "seeds for 80% power"}
ALPHA = 0.05  # the level the multiplicity note counts p-values against (memcap.laws)
# The per-seed table's columns in the report (the fixed sizes H, n, d_h, certified counts and
# the T grid stay in capacity.csv: the page keeps its width).
SEED_COLUMNS = [
    "sweep", "value", "context", "task", "seed", "capacity_shown", "T_at_capacity", "fitted_T",
    "fitted_T_high", "bound", "censored", "convergence_gain", "convergence",
]  # fmt: skip
# The estimates table's columns in the report (estimates.csv has every column).
ESTIMATE_COLUMNS = [
    "sweep", "value", "context", "task", "fitted_T_shown", "capacity_shown", "capacity_seeds",
    "fitted_T_seeds", "bound", "censored", "gain_mean", "gain_low", "gain_high", "convergence",
]  # fmt: skip


def scaling_section(
    stage: str, enabled: bool, figures: Sequence[Figure], table: TableFile
) -> ScalingSection:
    """The section of ``stage`` (synthetic: paper A, aot: paper B); ``table(name)`` is the path
    of one of the stage's tables, or None where the run has none."""
    section = ScalingSection(enabled=enabled, figures=list(figures))
    laws_path = table("laws")
    if laws_path is not None:
        laws = pd.read_csv(laws_path)
        section.verdicts, section.laws = verdict_tables(laws)
        section.figures = [_with_outcomes(f, laws) for f in section.figures]
        section.notes += law_notes(laws[laws["outcome"] != "inconclusive"]) + multiplicity(laws)
        section.underpowered = underpowered(laws)
        section.limitations += law_notes(laws[laws["outcome"] == "inconclusive"])
    estimates_path, capacity_path = table("estimates"), table("capacity")
    if estimates_path is not None:
        estimates = pd.read_csv(estimates_path)
        shown = estimates[[c for c in ESTIMATE_COLUMNS if c in estimates]]
        section.tables[
            "Memorized by this recipe, per setting: lower bounds on the capacity (seed mean ± "
            "standard error; ≥ where a seed's maximum is not bracketed by a larger T), every "
            "seed's count and fitted_T (the largest T fitted exactly)"
        ] = Table.from_frame(shown)
        limited = estimates.get("optimiser_limited", pd.Series(dtype=bool)).astype(bool).any()
        notes = caveats.convergence_notes(estimates)
        (section.limitations if limited else section.recipes).extend(notes)
    fits_path = table("fits")
    if fits_path is not None:
        fits = pd.read_csv(fits_path)
        section.fits = Table.from_frame(fits.drop(columns=["coefficients"], errors="ignore"))
    if capacity_path is not None:
        capacity = pd.read_csv(capacity_path)
        shown = capacity[[c for c in SEED_COLUMNS if c in capacity]]
        section.tables[
            "Memorized by this recipe, per setting and seed (capacity.csv has every column)"
        ] = Table.from_frame(shown)
        caveats.capacity_notes(stage, capacity, section)
    summary_path = table("summary")
    if summary_path is not None and stage == "aot":
        section.recipes += caveats.aot_recipes(pd.read_csv(summary_path))
    if summary_path is not None and stage == "synthetic":
        summary = pd.read_csv(summary_path)
        section.recipes += caveats.extra_budgets(summary) + caveats.restarts(summary)
    return section


def underpowered(laws: pd.DataFrame) -> list[str]:
    """The laws whose test had under 80% power against its stated effect (``power_at``), one
    phrase a law: each weak curve (its context and task), outcome, power and the seeds 80%
    would need."""
    if "power" not in laws:
        return []
    weak = laws[laws["power"].notna() & (laws["power"] < 0.8)]
    return [
        f"{law}: "
        + "; ".join(
            f"{row.curve.replace(' context,', '')} {row.outcome} at {row.power:.0%} "
            f"({_seeds_text(row.seeds_needed)} seeds)"
            for row in curves.itertuples()
        )
        for law, curves in weak.groupby("law", sort=False)
    ]


def _seeds_text(seeds: float) -> str:
    return "∞" if pd.isna(seeds) or seeds == float("inf") else f"{seeds:.0f}"


def verdict_tables(laws: pd.DataFrame) -> tuple[Table, Table]:
    """The compact verdict table (law, curve, outcome, test, statistic, p-values, power and
    seeds needed) and the full table with criteria, what was measured, the unweighted test,
    what a power is taken at and the caveats."""
    shown = _displayed(laws)
    compact = shown[[c for c in VERDICT_COLUMNS if c in shown]]
    full = shown[[c for c in FULL_COLUMNS if c in shown and _has_values(laws[c])]]
    return Table.from_frame(compact.rename(columns=HEADERS)), Table.from_frame(full)


def _has_values(column: pd.Series) -> bool:
    return bool(column.notna().any() and (column.astype(str).str.strip() != "").any())


def _displayed(laws: pd.DataFrame) -> pd.DataFrame:
    """``laws`` with its p-values as printed ("≤ floor" at a permutation floor, Holm's too),
    the seeds needed as whole numbers ("∞": no count up to the search limit reaches 80%), and
    empty text where a column has none."""
    shown = laws.copy()
    floor = shown["p_floor"] if "p_floor" in shown else pd.Series(0.0, index=shown.index)
    raw = shown["p_value"].copy() if "p_value" in shown else None
    for column in ("p_value", "p_holm"):
        if column in shown:
            shown[column] = [
                _p_text(p, f, r) for p, f, r in zip(shown[column], floor, raw, strict=True)
            ]
    if "seeds_needed" in shown:
        shown["seeds_needed"] = [
            "—" if pd.isna(v) else "∞" if v == float("inf") else f"{v:.0f}"
            for v in shown["seeds_needed"]
        ]
    for column in ("comparison", "power_at", "caveat"):
        if column in shown:
            shown[column] = shown[column].fillna("")
    return shown


def _p_text(p: float, floor: float, raw: float) -> str:
    """A p-value as printed: "≤ p" where the raw p-value sits at its test's floor (a bound, and
    so is its Holm adjustment), else 3 significant digits."""
    if pd.isna(p):
        return "—"
    at_floor = not pd.isna(floor) and floor > 0 and raw <= floor * (1 + 1e-9)
    return f"≤ {p:.2g}" if at_floor else format_number(float(p))


def law_notes(laws: pd.DataFrame) -> list[str]:
    """ "Not reproduced in this run" naming the laws whose test fails (with the caveat on the
    verdict), the inconclusive ones with their power and the seeds 80% power would need, and
    the untestable ones (the table's multiplicity: :func:`multiplicity`)."""
    notes = []
    for outcome, lead in (
        ("fails", "Not reproduced in this run (the test fails)"),
        (
            "inconclusive",
            "Inconclusive in this run (each with the test's power and the seeds per setting "
            "that 80% power would need)",
        ),
        (
            "untestable on this grid",
            "Untestable on this grid (too few values of x, on the grid or below a ceiling, for "
            "the test: more seeds would not decide it)",
        ),
    ):
        named = [
            f"{r.law} ({r.sweep}, {r.curve}{_p(r)}{_power(r)}){_caveat(r)}"
            for r in laws[laws["outcome"] == outcome].itertuples()
        ]
        if named:
            notes.append(f"{lead}: {'; '.join(named)}.")
    return notes


def multiplicity(laws: pd.DataFrame) -> list[str]:
    """How many of the table's p-values below the level stay there after Holm's adjustment,
    naming the decided laws that do not."""
    if "p_holm" not in laws or laws["p_value"].notna().sum() < 2:
        return []
    low = laws["p_value"] < ALPHA
    lost = laws[low & (laws["p_holm"] >= ALPHA) & laws["outcome"].isin(["holds", "fails"])]
    text = (
        f"Multiplicity: this table holds {int(laws['p_value'].notna().sum())} tests; p (Holm) "
        f"is each p-value adjusted by Holm's method over all of them (family-wise error "
        f"{ALPHA:.0%}). {int((low & (laws['p_holm'] < ALPHA)).sum())} of the {int(low.sum())} "
        f"p-values below {ALPHA} stay below it after the adjustment"
    )
    if len(lost):
        text += "; decided below it but not after: " + "; ".join(
            f"{r.law} ({r.sweep}, {r.curve}: {r.outcome}, p (Holm) = {r.p_holm:.2g})"
            for r in lost.itertuples()
        )
    return [text + ". Each outcome is read on its own test's p-value."]


def _p(row) -> str:
    p_value = row.p_value
    if pd.isna(p_value):
        return ""
    floor = getattr(row, "p_floor", 0.0)
    if not pd.isna(floor) and floor > 0 and p_value <= floor * (1 + 1e-9):
        return f", p ≤ {p_value:.2g}"
    return f", p = {p_value:.2g}"


def _power(row) -> str:
    """ ", power 0.42 at <effect>, 12 seeds for 80%" where the row has a power."""
    power = getattr(row, "power", float("nan"))
    if pd.isna(power):
        return ""
    seeds = row.seeds_needed
    needed = "no seed count found" if seeds == float("inf") else f"{seeds:.0f} seeds"
    return f", power {power:.2f} at {row.power_at}: {needed} for 80%"


def _caveat(row) -> str:
    caveat = getattr(row, "caveat", "")
    return f" (caveat: {caveat})" if isinstance(caveat, str) and caveat else ""


def _with_outcomes(figure: Figure, laws: pd.DataFrame) -> Figure:
    """``figure`` with the outcomes of the laws of its sweep appended to its caption."""
    sweep = Path(figure.source).stem.removeprefix("memorized_")
    rows = laws[laws["sweep"] == sweep]
    if rows.empty:
        return figure
    outcomes = "; ".join(
        f"{r.law}, {r.curve}: {_comparison(r) or r.outcome} ({r.test}{_p(r)})"
        for r in rows.itertuples()
    )
    return replace(figure, caption=f"{figure.caption} Outcomes: {outcomes}.".strip())


def _comparison(row) -> str:
    """A comparison's outcome (paper B's AoT against MLP), else empty."""
    value = getattr(row, "comparison", "")
    return value if isinstance(value, str) else ""
