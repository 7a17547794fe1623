"""Render docs/performance.md's benchmark table from the result files.

Reads every ``benchmarks/results/*.json`` (written by the benchmarks through
``_results.record``) and replaces the text between ``<!-- benchmarks:begin -->`` and
``<!-- benchmarks:end -->`` in docs/performance.md with one table, a row per file; the rest
of the page is left as it is.

    uv run --locked --all-extras python benchmarks/performance_table.py
    uv run --locked --all-extras python benchmarks/performance_table.py --check  # fails if stale
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PAGE = ROOT / "docs" / "performance.md"
BEGIN, END = "<!-- benchmarks:begin -->", "<!-- benchmarks:end -->"
MEASURED = "measured"  # the source of a file written by _results.record

# Rows in this order (results of other benchmarks follow, by name), each with its docs pages.
PAGES = {
    "bench_kruskal": ["kruskal.md"],
    "bench_kruskal_device": ["kruskal.md"],
    "bench_context_rank": ["kruskal.md"],
    "bench_context_rank_device": ["extract.md", "gpu.md"],
    "bench_equilibrate": ["extract.md", "decisions.md"],
    "bench_layers": ["extract.md"],
    "bench_extract": ["extract.md"],
    "bench_init_memory": ["extract.md"],
    "bench_bf16_verdicts": ["extract.md"],
    "bench_training": ["synthetic.md"],
    "bench_synthetic_step": ["synthetic.md"],
    "bench_synthetic_stage": ["synthetic.md"],
    "bench_aot": ["aot.md"],
    "bench_aot_stage": ["aot.md"],
    "gpu_sweeps": ["aot.md", "gpu.md"],
    "paper_a_grid": ["synthetic.md", "gpu.md"],
    "gpu_scale_audit": ["extract.md", "gpu.md"],
    "recipe_comparison": ["synthetic.md", "laws.md"],
    "recipe_options": ["synthetic.md"],
}
HEADER = (
    "| script | what it compares | ratio | ours | baseline | repeats | machine | page |\n"
    "|---|---|---|---|---|---|---|---|"
)


def load(folder: Path) -> list[dict]:
    """Every result file of ``folder``, in PAGES' order, then by name."""
    results = [json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))]
    order = {name: i for i, name in enumerate(PAGES)}
    return sorted(results, key=lambda r: (order.get(r["benchmark"], len(order)), r["benchmark"]))


def _number(x: float) -> str:
    """Four significant figures at most; thousands separated."""
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"


def _measure(m: dict | None) -> str:
    if not m or m.get("median") is None:
        return "—"
    unit = f" {m['unit']}" if m.get("unit") else ""
    return f"{m['label']}: {_number(m['median'])}{unit}"


def _ratio(r: dict) -> str:
    if r.get("ratio") is None:
        text = r.get("ratio_is") or "—"
    else:
        text = f"**{_number(r['ratio'])}**"
        if r.get("ratio_is"):
            text += f" = {r['ratio_is']}"
    others = r.get("other_ratios") or {}
    if others:
        text += "; " + ", ".join(f"{k} {_number(v)}" for k, v in others.items())
    if r.get("summary"):
        text += f"; {r['summary']}"
    return text


def _machine(r: dict) -> str:
    """The machine facts the file holds; a run of another kind than ``record`` marked †."""
    m = r.get("machine") or {}
    parts = [m["gpu"]] if m.get("gpu") else []
    cpus = m.get("cpus_usable") or m.get("cpu_count")
    if cpus:
        parts.append(f"{cpus} CPUs")
    gflops = m.get("matmul_gflops_1thread")
    if gflops is not None:
        shown = f"{gflops:.0f}" if isinstance(gflops, int | float) else str(gflops)
        parts.append(f"matmul {shown} GFLOP/s (1 thread)")
    if m.get("torch"):
        parts.append(f"torch {m['torch']}")
    text = ", ".join(parts) or "not recorded"
    return text if r.get("source", MEASURED) == MEASURED else text + " †"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(results: list[dict]) -> str:
    """The markdown table of ``results``, and a note under it for rows not measured by
    ``record`` (†: where their figures come from)."""
    rows = [HEADER]
    for r in results:
        pages = ", ".join(f"[{p}]({p})" for p in PAGES.get(r["benchmark"], []))
        repeats = r.get("repeats")
        cells = [
            f"`{r['benchmark']}.py`",
            r.get("compares", ""),
            _ratio(r),
            _measure(r.get("ours")),
            _measure(r.get("baseline")),
            "—" if repeats is None else str(repeats),
            _machine(r),
            pages or "—",
        ]
        rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    sources = dict.fromkeys(r["source"] for r in results if r.get("source", MEASURED) != MEASURED)
    notes = [f"† {source}." for source in sources]
    return "\n".join(rows + ([""] + notes if notes else []))


def replace_table(page: str, table: str) -> str:
    """``page`` with the text between the markers replaced by ``table``."""
    begin, end = page.find(BEGIN), page.find(END)
    if begin < 0 or end < begin:
        raise ValueError(f"the page needs {BEGIN} then {END}")
    return page[: begin + len(BEGIN)] + "\n" + table + "\n" + page[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--page", type=Path, default=PAGE)
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if the table is stale"
    )
    args = parser.parse_args(argv)
    before = args.page.read_text()
    after = replace_table(before, render(load(args.results)))
    if args.check:
        if after != before:
            print(f"{args.page}: the table is stale; run benchmarks/performance_table.py")
            return 1
        return 0
    if after != before:
        args.page.write_text(after)
        print(f"rewrote the table of {args.page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
