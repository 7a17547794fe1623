"""A paper's scaling-law section of the report: its laws decided on seeds, their figures with the
outcomes in the captions, the capacity estimates and the caveats.

The laws come decided (``laws.csv`` of the stage: outcome, test, statistic, p-value, Holm's
adjusted p-value, and beside an inconclusive test its power and the seeds 80% power would need,
per law and curve, :mod:`memcap.law_tests`); this module only arranges them: a compact verdict
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

from memcap.report.context import Figure, ScalingSection, Table
from memcap.report.render import format_number
from memcap.synthetic.summary import bound_ratios

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
ALPHA = 0.05  # the level the multiplicity note counts p-values against (memcap.law_tests)
# The per-seed table's columns in the report (the fixed sizes H, n, d_h, certified counts and
# the T grid stay in capacity.csv: the page keeps its width).
SEED_COLUMNS = [
    "sweep", "value", "context", "task", "seed", "capacity", "T_at_capacity", "bound",
    "censored", "under_trained", "convergence_gain", "optimiser_limited",
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
        section.notes += law_notes(laws)
    estimates_path, capacity_path = table("estimates"), table("capacity")
    if estimates_path is not None:
        estimates = pd.read_csv(estimates_path)
        section.tables["Capacity per setting: seed mean ± standard error, seeds, best seed"] = (
            Table.from_frame(estimates)
        )
        section.notes += _convergence_notes(estimates)
    fits_path = table("fits")
    if fits_path is not None:
        fits = pd.read_csv(fits_path)
        section.fits = Table.from_frame(fits.drop(columns=["coefficients"], errors="ignore"))
    if capacity_path is not None:
        capacity = pd.read_csv(capacity_path)
        shown = capacity[[c for c in SEED_COLUMNS if c in capacity]]
        section.tables["Capacity per setting and seed (capacity.csv has every column)"] = (
            Table.from_frame(shown)
        )
        section.notes += _capacity_notes(stage, capacity, section)
    summary_path = table("summary")
    if summary_path is not None and stage == "aot":
        section.notes += _aot_recipes(pd.read_csv(summary_path))
    if summary_path is not None and stage == "synthetic":
        summary = pd.read_csv(summary_path)
        section.notes += _extra_budgets(summary) + _restarts(summary)
    return section


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
    verdict), the inconclusive ones with their power and the seeds 80% power would need, the
    untestable ones, and the table's multiplicity."""
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
    return notes + _multiplicity(laws)


def _multiplicity(laws: pd.DataFrame) -> list[str]:
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


def _convergence_notes(estimates: pd.DataFrame) -> list[str]:
    """What the convergence check found, per setting."""
    if "optimiser_limited" not in estimates or estimates["convergence_gain"].isna().all():
        return []
    limited = estimates[estimates["optimiser_limited"].astype(bool)]
    gains = estimates["convergence_gain"].dropna()
    text = (
        f"Convergence check at every setting's capacity (the median seed trained again with "
        f"the longer budget): gains {gains.min():+.1%} to {gains.max():+.1%}; "
        f"{len(limited)} of {len(estimates)} settings optimiser-limited"
    )
    if len(limited):
        text += " and trained again, every seed, with the longer budget: " + ", ".join(
            _settings(limited)
        )
    return [text + "."]


def _capacity_notes(stage: str, capacity: pd.DataFrame, section: ScalingSection) -> list[str]:
    notes = []
    if "censored" in capacity and capacity["censored"].astype(bool).any():
        notes.append(
            f"{int(capacity['censored'].astype(bool).sum())} of {len(capacity)} settings "
            "memorized their largest T at or above the ladder's level: their capacity is a "
            "lower bound, and the laws leave those settings out (raise synthetic.ladder.max_T "
            "or the sweep's T)."
        )
    if stage == "synthetic" and {"bound", "task"} <= set(capacity.columns):
        ratios = bound_ratios(capacity).round(2)
        section.tables["Trained counts against H(n−1)+1 (best seeds)"] = Table.from_frame(ratios)
        notes.append(_bound_note(ratios))
    if "largest_drop" in capacity:
        drops = capacity[capacity["largest_drop"] > 0.10]
        notes.append(
            f"{len(drops)} of {len(capacity)} series memorize more than 10% fewer examples "
            "at a larger T than at a smaller one (the datasets are nested)"
            + (f": {', '.join(_settings(drops))}." if len(drops) else ".")
        )
    if "under_trained" in capacity and capacity["under_trained"].astype(bool).any():
        flagged = capacity[capacity["under_trained"].astype(bool)]
        notes.append(
            f"{len(flagged)} of {len(capacity)} settings are under-trained (not fitted, "
            f"training loss still falling at the end of its last budget): "
            f"{', '.join(_settings(flagged))}."
        )
    return notes


def _bound_note(ratios: pd.DataFrame) -> str:
    """What Theorem 1's H(n−1)+1 predicts for each task and what the trained counts show."""
    where = "; ".join(
        f"{r.sweep} {r.task} {r.context}: {r.ratio_min:g}–{r.ratio_max:g}× (median "
        f"{r.ratio_median:g}×)"
        for r in ratios.itertuples()
    )
    return (
        "H(n−1)+1 is what Theorem 1's construction memorizes with its attention weights fixed; "
        "with a shared context it is also the most a readout of fixed head outputs can fit "
        "for generic regression targets (the head outputs span at most H(n−1)+1 directions), "
        "while classification needs only the right argmax. Trained attention moves the head "
        "outputs with the examples, so neither limit binds a trained layer; the best seeds "
        f"memorize, per bound: {where}. Regression counts an example within the tolerance "
        "(synthetic.train.regression_tol), so a constant output already catches about twice "
        "the tolerance's share of uniform targets."
    )


def _settings(rows: pd.DataFrame) -> list[str]:
    """The distinct swept settings of ``rows``, named "sweep swept=value", sorted."""
    return sorted({f"{r.sweep} {r.swept}={r.value}" for r in rows.itertuples()})


def _extra_budgets(summary: pd.DataFrame) -> list[str]:
    """A note on the replicas that trained beyond one budget (``train.extra_budgets``)."""
    if not {"steps_run", "steps"} <= set(summary.columns):
        return []
    longer = summary[summary["steps_run"] > summary["steps"]]
    if longer.empty:
        return []
    return [
        f"{len(longer)} of {len(summary)} replicas were still learning when their step budget "
        f"ended and trained further budgets (up to {int(longer['steps_run'].max()):,} steps): "
        f"{', '.join(_settings(longer))}."
    ]


def _restarts(summary: pd.DataFrame) -> list[str]:
    """A note on the replicas whose kept training is a restart (``ladder.restarts``)."""
    if "restarts" not in summary or not (summary["restarts"] > 0).any():
        return []
    again = summary[summary["restarts"] > 0]
    return [
        f"{len(again)} of {len(summary)} replicas fell more than 10% below their series' count "
        "at a smaller T and keep a retraining from a fresh initialisation: "
        f"{', '.join(_settings(again))}."
    ]


def _aot_recipes(summary: pd.DataFrame) -> list[str]:
    """One note per AoT sweep: the training recipe, model variant and metric of its curves."""
    if not {"recipe", "variant", "metric"} <= set(summary.columns):
        return []
    notes = []
    metrics = {"last_batches": "mean of the last training batches", "all_inputs": "on all inputs"}
    for sweep, rows in summary.groupby("sweep", sort=False):
        first = rows.iloc[0]
        notes.append(
            f"{sweep}: {first['recipe']} recipe, {first['variant']} model variant, accuracy "
            f"{metrics.get(first['metric'], first['metric'])}."
        )
    return notes
