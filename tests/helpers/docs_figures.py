"""The default run's figures in docs/, generated from the stored default run
(tests/data/default_run, refreshed by tests/helpers/report_fixture.py after a ``make run``).

Each block sits between ``<!-- {name}:begin -->`` and ``<!-- {name}:end -->`` markers in its
page; the text around it says what the run was. Rank readings are recomputed with
:mod:`memcap.capacity.ceiling` from the stored columns, so a page reads ranks as the report
does now.

    .venv/bin/python tests/helpers/docs_figures.py --write   # writes every block
    .venv/bin/python tests/helpers/docs_figures.py --check   # exit 1 when a page differs
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from memcap.capacity.ceiling import ceiling, rank_text, shared_cap

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "tests" / "data" / "default_run" / "files" / "results"
SHARED_KINDS = (
    "at a ceiling",
    "certified at H(n−1)+1",
    "resolved below H(n−1)+1",
    "a range",
    "not resolved",
)


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows]) + "\n"


def _p(value: float) -> str:
    return "" if pd.isna(value) else f"{value:.2g}"


def _law(row: pd.Series) -> str:
    """A law's outcome with its test, p-value and, where it is not decided, its power."""
    words = f"{row['law']} **{row['outcome']}**"
    if stop := re.search(r"stops at (\S+ = [\d.]+ < [\d.]+)", str(row.get("measured", ""))):
        words += f", growth stops at {stop.group(1)}"
    if row["test"] != "none" and not pd.isna(row["p_value"]):
        words += f" ({row['test']}, p = {_p(row['p_value'])}"
        if not pd.isna(row.get("power")):
            words += f"; power {row['power']:.2f}"
            if not pd.isna(row.get("seeds_needed")):
                words += f", {int(row['seeds_needed'])} seeds for 80%"
        words += ")"
    return words


def _series(rows: pd.DataFrame, swept: str, column: str = "capacity_shown") -> str:
    values = ", ".join(str(v) for v in rows["value"])
    return f"{', '.join(rows[column].astype(str))} at {swept} = {values}"


def synthetic_estimates() -> str:
    """Paper A's curves: seed means ± SE per value and the laws decided on them (fitted_T
    beside the most-memorized count where the laws are decided on it)."""
    estimates = pd.read_csv(RESULTS / "synthetic" / "estimates.csv")
    laws = pd.read_csv(RESULTS / "synthetic" / "laws.csv")
    on_fitted = bool((laws["notion"] == "fitted_T").any())
    rows = []
    for (sweep, context, task), group in estimates.groupby(["sweep", "context", "task"]):
        curve = f"{context} context, {task}"
        decided = laws[(laws["sweep"] == sweep) & (laws["curve"] == curve)]
        group = group.sort_values("value")
        swept = group["swept"].iloc[0]
        fitted = [_series(group, swept, "fitted_T_shown")] if on_fitted else []
        rows.append([
            f"{sweep}, {context}, {task}",
            *fitted,
            _series(group, swept),
            "; ".join(_law(law) for _, law in decided.iterrows()) or "—",
        ])  # fmt: skip
    convergence = Counter(estimates["convergence"])
    checked = ", ".join(f"{count} {kind}" for kind, count in sorted(convergence.items()))
    bracketed = int(estimates["bracketed_seeds"].sum())
    seeds = int(estimates["seeds"].sum())
    header = ["curve", "capacity: seed mean ± SE", "laws"]
    measured = ""
    if on_fitted:
        header.insert(1, "fitted_T (decides): seed mean ± SE")
        measured = f"; {int(estimates['fitted_measured_seeds'].sum())} of {seeds} seeds' fitted_T"
        measured += " measured (a bracket at most 1.25× wide)"
    return _table(header, rows) + (
        f"\nThe convergence check reads the {len(estimates)} settings: {checked}; {bracketed} of "
        f"{seeds} seeds' maxima are bracketed{measured}.\n"
    )


def aot_laws() -> str:
    """Paper B's findings: each law's outcome, p-value (Holm) and power."""
    laws = pd.read_csv(RESULTS / "aot" / "laws.csv")
    rows = [
        [row["law"], row["sweep"], row["curve"], row["outcome"], _p(row["p_value"]),
         _p(row["p_holm"]), _p(row["power"])]
        for _, row in laws.iterrows()
    ]  # fmt: skip
    table = _table(["finding", "sweep", "curve", "outcome", "p", "p (Holm)", "power"], rows)
    open_laws = [
        f"{row['law']} on {row['sweep']} ({row['curve']}) is inconclusive: {row['measured']}"
        + ("" if pd.isna(row["power"]) else f"; power {row['power']:.2f}")
        + ("" if pd.isna(row["seeds_needed"]) else f", {int(row['seeds_needed'])} seeds for 80%")
        + "."
        for _, row in laws.iterrows()
        if row["outcome"] == "inconclusive"
    ]
    return table + ("\n" + "\n\n".join(open_laws) + "\n" if open_laws else "")


def law_counts() -> str:
    """How many laws each paper's table decides, and how many at p < 0.05 stay so after Holm."""
    parts = []
    for paper, stage in (("paper A", "synthetic"), ("paper B", "aot")):
        laws = pd.read_csv(RESULTS / stage / "laws.csv")
        tested = laws[laws["test"] != "none"]
        below = int((tested["p_value"] < 0.05).sum())
        stay = int((tested["p_holm"] < 0.05).sum())
        parts.append(
            f"{paper}: {len(tested)} tests, {below} at p < 0.05, {stay} of them after Holm"
        )
    return "; ".join(parts) + ".\n"


def _synthetic_law(law: str, curve: str | None = None) -> pd.Series:
    laws = pd.read_csv(RESULTS / "synthetic" / "laws.csv")
    rows = laws[(laws["law"] == law) & ((laws["curve"] == curve) if curve else True)]
    return rows.iloc[0]


SPREAD = re.compile(r"mean\^(\S+) \[(\S+), (\S+)\] \(95%\) over this run's (\d+)")
FIT = re.compile(r"F\([^)]*\) = [\d.]+, p = ([\d.]+); slope ([\d.]+) \[([\d.]+), ([\d.]+)\]")


def law_weights() -> str:
    """The seeds' spread against their mean (the 1/mean² weights), and how the random-context
    H curve reads weighted and unweighted, from the stored run's laws.csv."""
    line = _synthetic_law("linear in H", "random context, classification")
    b, lo, hi, settings = SPREAD.search(line["criterion"]).groups()
    (p, slope, s_lo, s_hi), (p_u, slope_u, _, _) = FIT.findall(line["measured"])
    return (
        f"Over the stored default run's {settings} settings, a log-log fit of the seeds' SD "
        f"against their mean gives SD ∝ mean^{b}, 95% interval [{lo}, {hi}]. Its random-context "
        f"H curve (classification) {line['outcome']} at p = {p} weighted (slope {slope} "
        f"[{s_lo}, {s_hi}]) and p = {p_u} unweighted (slope {slope_u}).\n"
    )


def saturation_power() -> str:
    """The saturation test's outcome and power in the stored run."""
    row = _synthetic_law("saturates in d_h beyond n")
    outcome = row["outcome"] if row["outcome"] in ("holds", "fails") else f"is {row['outcome']}"
    words = f"In the stored default run, saturation beyond n {outcome} (p = {_p(row['p_value'])})"
    if not pd.isna(row["power"]):
        words += f", with power {row['power']:.0%} against {row['power_at']}"
        if not pd.isna(row["seeds_needed"]):
            words += f"; {int(row['seeds_needed'])} seeds reach 80%"
    return words + ".\n"


def real_memorization_estimates() -> str:
    """The real embeddings against the controls: seed means per H, and linear in H."""
    folder = RESULTS / "real_memorization"
    if not (folder / "estimates.csv").exists():
        return "The stored default run has no real-memorization stage.\n"
    estimates = pd.read_csv(folder / "estimates.csv", dtype={"layer": str})
    laws = pd.read_csv(folder / "laws.csv", dtype={"layer": str})
    rows = []
    keys = ["model", "layer", "context", "task", "input"]
    for (model, layer, context, task, kind), group in estimates.groupby(keys, sort=False):
        law = laws[(laws["model"] == model) & (laws["layer"] == layer) & (laws["input"] == kind)]
        group = group.sort_values("value")
        rows.append([
            f"{model} · {layer}", f"{context}, {task}", kind,
            " / ".join(group["capacity_shown"]),
            " / ".join(str(int(b)) for b in group["bound"]),
            "; ".join(_law(r) for _, r in law.iterrows()) or "—",
        ])  # fmt: skip
    header = ["model · layer", "context, task", "input", "capacity at each H", "bound", "law"]
    return _table(header, rows)


def _shared_kind(row: pd.Series) -> str:
    """Which reading a first-run shared-context rank gets (:mod:`memcap.capacity.ceiling`)."""
    T, H, n, d = int(row["T"]), int(row["H"]), int(row["n"]), int(row["d"])
    if row["rank_high"] >= ceiling(T, H, d):
        return SHARED_KINDS[0]
    if row["rank_high"] >= H * (n - 1) + 1:
        return SHARED_KINDS[1]
    if row["rank_low"] == row["rank_high"] > 0:
        return SHARED_KINDS[2]
    return SHARED_KINDS[3] if row["rank_low"] > 0 else SHARED_KINDS[4]


def _distinct(row: pd.Series) -> int | None:
    value = row.get("shared_distinct_rows")
    return None if value is None or pd.isna(value) else int(value)


def shared_readings() -> str:
    """The first shared context's ranks: how many get each reading, and per layer the rank at
    the smallest and largest H from the certified count up to its cap."""
    real = pd.read_csv(RESULTS / "capacity" / "real.csv", dtype={"layer": str})
    shared = real[(real["contexts"] == "shared") & (real["shared_context"] == 0)]
    shared = shared[shared["draw"] == 0]
    kinds = Counter(_shared_kind(row) for _, row in shared.iterrows())
    counts = ", ".join(f"{kinds.get(kind, 0)} {kind}" for kind in SHARED_KINDS)
    resolved = shared["rank_low"] == shared["rank_high"]
    gaps = (
        f"Resolved rows have at least {shared.loc[resolved, 'gap_decades'].min():.2g} decades of "
        f"gap at their edge, unresolved ones {shared.loc[~resolved, 'gap_decades'].min():.2g}–"
        f"{shared.loc[~resolved, 'gap_decades'].max():.2g}."
    )
    rows = []
    for (model, layer), group in shared.groupby(["model", "layer"], sort=False):
        ends = group.sort_values("H").iloc[[0, -1]]
        cells, spreads = [], []
        for _, row in ends.iterrows():
            T, H, n, d = (int(row[k]) for k in ("T", "H", "n", "d"))
            cap = shared_cap(T, H, n, d, _distinct(row))
            resolved = row["rank_low"] == row["rank_high"]
            cells.append(f"{rank_text(int(row['rank_high']), cap, resolved)} ({_shared_kind(row)})")
            spreads.append(
                f"{row['spread_median']:.0f} [{row['spread_min']:.0f}–{row['spread_max']:.0f}], "
                f"{row['spread_resolved']:.0f} of {row['spread_runs']:.0f}"
            )
        rows.append([model, layer, *cells, *spreads])
    H = sorted(shared["H"].unique())
    header = ["model", "layer", f"H = {H[0]}", f"H = {H[-1]}", f"runs, H = {H[0]}"]
    header.append(f"runs, H = {H[-1]}")
    return f"Of {len(shared)} ranks: {counts}. {gaps}\n\n" + _table(header, rows)


BLOCKS: dict[tuple[str, str], Callable[[], str]] = {
    ("docs/synthetic.md", "synthetic-estimates"): synthetic_estimates,
    ("docs/aot.md", "aot-laws"): aot_laws,
    ("docs/laws.md", "law-counts"): law_counts,
    ("docs/laws.md", "law-weights"): law_weights,
    ("docs/laws.md", "saturation-power"): saturation_power,
    ("docs/real_memorization.md", "real-memorization-estimates"): real_memorization_estimates,
    ("docs/capacity.md", "shared-readings"): shared_readings,
}


def replace_block(text: str, name: str, body: str) -> str:
    """``text`` with the lines between its ``name`` markers replaced by ``body``."""
    begin, end = f"<!-- {name}:begin -->\n", f"<!-- {name}:end -->"
    head, rest = text.split(begin, 1)
    return head + begin + body + end + rest.split(end, 1)[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true")
    mode.add_argument("--check", action="store_true")
    args = parser.parse_args()
    pages: dict[str, str] = {}
    for (page, name), block in BLOCKS.items():
        text = pages.get(page) or (ROOT / page).read_text()
        pages[page] = replace_block(text, name, block())
    stale = [page for page, text in pages.items() if (ROOT / page).read_text() != text]
    if args.write:
        for page in stale:
            (ROOT / page).write_text(pages[page])
    elif stale:
        print(f"stale: {', '.join(stale)}: run --write", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
