"""The whole default AoT stage (paper B's sweeps), CPU seconds per sweep: this code vs another tree.

Every sweep of ``config.yaml``'s ``aot`` section runs in its own process, one thread,
``time.process_time()`` around :func:`memcap.aot.sweep.run_sweep` (so a sweep pays its own
one-off costs; imports are not counted: the rule ``train_aot`` imports once for every sweep,
docs/aot.md times the jobs themselves). ``--before PATH`` runs the same resolved config
through the package of another checkout (``PATH/src``, e.g. ``git worktree add ../aot_before
main``). The two trees alternate sweep by sweep, ``--repeats`` times (the machine may be
shared: interleaved repeats see the same load), and each sweep's median is kept. Prints one
line per sweep, the totals, the per-setting accuracies of the two trees compared (largest
difference), paper B's findings (``memcap.aot.laws``) on both trees' tables with every
changed outcome, each setting's seed mean against today's seeds' standard error, the
machine's single-thread float32 1024² matmul GFLOP/s, and ``RATIO before/ours`` of the
stage's median CPU seconds.

    .venv/bin/python benchmarks/bench_aot_stage.py --before ../aot_before --repeats 3
    .venv/bin/python benchmarks/bench_aot_stage.py --sweeps heads low_dim   # ours only
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _results import record
from _stage import ROOT, matmul_gflops, resolve, resolve_before, run_tree

KEYS = ["sweep", "model", "N", "d", "d_h", "H", "width", "seed"]


def worker(config_json: str, sweep: str, table_out: str) -> None:
    """Run one sweep in this process and print its CPU seconds as JSON."""
    import torch

    from memcap.aot.settings import StageSettings
    from memcap.aot.sweep import run_sweep

    torch.set_num_threads(1)
    config = json.loads(Path(config_json).read_text())
    section = config["aot"]
    stage_section = {k: v for k, v in section.items() if k != "sweeps"}
    stage = StageSettings.from_config(stage_section, config["seed"], config["engine"])
    start = time.process_time()
    result = run_sweep(sweep, section["sweeps"][sweep], stage, torch.device("cpu"))
    cpu = time.process_time() - start
    table = result.table.assign(sweep=sweep)
    table.to_csv(table_out, index=False)
    print(json.dumps({"sweep": sweep, "cpu": cpu, "rows": len(table)}))


def largest_difference(work: Path, sweeps: list[str]) -> tuple[float, str]:
    """Largest |accuracy before − ours| over every setting (both accuracy columns)."""
    import pandas as pd

    worst, where = 0.0, ""
    for sweep in sweeps:
        ours = pd.read_csv(work / f"ours_{sweep}.csv")
        before = pd.read_csv(work / f"before_{sweep}.csv")
        keys = [k for k in KEYS if k in ours.columns]
        both = ours.merge(before, on=keys, suffixes=("", "_before"), validate="one_to_one")
        if len(both) != len(ours):
            raise RuntimeError(f"{sweep}: the two trees' settings differ")
        for column in ("accuracy", "accuracy_table"):
            gap = (both[column] - both[f"{column}_before"]).abs()
            if gap.max() > worst:
                row = both.loc[gap.idxmax()]
                worst = float(gap.max())
                where = f"{sweep} {column} " + " ".join(f"{k}={row[k]}" for k in keys[1:])
    return worst, where


def compare_findings(work: Path, sweeps: list[str]) -> list[str]:
    """Paper B's findings (:func:`memcap.aot.laws.law_table`) on both trees' tables, and each
    setting's seed mean accuracy against today's seeds' standard error; lines to print."""
    import pandas as pd

    from memcap.aot.laws import law_table
    from memcap.aot.summary import summarize

    tables = {
        tag: summarize(pd.read_csv(work / f"{tag}_{s}.csv") for s in sweeps)
        for tag in ("before", "ours")
    }
    laws = {tag: law_table(table) for tag, table in tables.items()}
    keys = ["law", "sweep", "curve"]
    both = laws["ours"].merge(laws["before"], on=keys, suffixes=("", "_before"), how="outer")
    changed = both[both["outcome"] != both["outcome_before"]]
    lines = [f"findings: {len(both)} rows, {len(changed)} with another outcome"]
    lines += [
        f"  {r.law} {r.sweep} {r.curve}: {r.outcome_before} (p {r.p_value_before:.3g}, "
        f"{r.measured_before}) -> {r.outcome} (p {r.p_value:.3g}, {r.measured})"
        for r in changed.itertuples()
    ]
    setting = [k for k in KEYS if k != "seed"]
    stats = {
        tag: t.groupby(setting)["accuracy"].agg(["mean", "sem", "count"])
        for tag, t in tables.items()
    }
    paired = stats["ours"].merge(
        stats["before"], left_index=True, right_index=True, suffixes=("", "_before")
    )
    paired["gap_in_se"] = (paired["mean"] - paired["mean_before"]).abs() / paired["sem_before"]
    outside = paired[paired["gap_in_se"] > 1]
    lines.append(
        f"settings: {len(paired)}; seed mean within one standard error of today's seeds: "
        f"{len(paired) - len(outside)}; largest gap {paired['gap_in_se'].max():.2f} SE"
    )
    lines += [
        f"  outside: {' '.join(f'{k}={v}' for k, v in zip(setting, idx, strict=True))} "
        f"{r.mean_before:.4f} -> {r.mean:.4f} (SE {r.sem_before:.4f}, {r.gap_in_se:.2f} SE)"
        for idx, r in zip(outside.index, outside.itertuples(), strict=True)
    ]
    return lines


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(*sys.argv[2:5])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "config.yaml")
    parser.add_argument("--before", type=Path, help="another checkout to compare against")
    parser.add_argument("--sweeps", nargs="*", help="default: every sweep of the config")
    parser.add_argument("--repeats", type=int, default=1, help="interleaved runs of each tree")
    parser.add_argument("--keep", type=Path, help="keep the tables and timings here")
    args = parser.parse_args()
    config = resolve(args.config)
    sweeps = args.sweeps or list(config["aot"]["sweeps"])
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench_aot_stage_"))
    work.mkdir(parents=True, exist_ok=True)
    trees = {"ours": (ROOT / "src", work / "config.json")}
    trees["ours"][1].write_text(json.dumps(config))
    if args.before is not None:
        trees["before"] = (args.before / "src", work / "before_config.json")
        trees["before"][1].write_text(json.dumps(resolve_before(args.config, args.before)))
    gflops = [matmul_gflops()]
    print(f"single-thread float32 1024^2 matmul: {gflops[0]:.0f} GFLOP/s", flush=True)
    runs: dict[str, dict[str, list[float]]] = {tag: {s: [] for s in sweeps} for tag in trees}
    for _ in range(args.repeats):
        for sweep in sweeps:
            for tag in sorted(trees):  # "before" first
                src, config_json = trees[tag]
                cpu = run_tree(__file__, src, config_json, [sweep], work, tag)
                runs[tag][sweep].append(cpu[sweep])
        gflops.append(matmul_gflops())
    (work / "cpu.json").write_text(json.dumps(runs))
    median = {tag: {s: statistics.median(v) for s, v in runs[tag].items()} for tag in runs}
    flops = statistics.median(gflops)
    print(f"matmul over the run: median {flops:.0f} GFLOP/s ({min(gflops):.0f}-{max(gflops):.0f})")
    ours = median["ours"]
    if "before" not in median:
        print(f"total {sum(ours.values()):.1f} s CPU (median of {args.repeats})")
        return
    before = median["before"]
    print(f"{'sweep':<12} {'before s':>9} {'ours s':>8} {'ratio':>6}  (medians of {args.repeats})")
    for sweep in sweeps:
        ratio = before[sweep] / ours[sweep]
        print(f"{sweep:<12} {before[sweep]:9.1f} {ours[sweep]:8.1f} {ratio:6.2f}")
    total_before, total_ours = sum(before.values()), sum(ours.values())
    print(f"{'total':<12} {total_before:9.1f} {total_ours:8.1f}")
    gap, where = largest_difference(work, sweeps)
    print(f"largest accuracy difference: {gap:.4f} ({where})")
    findings = compare_findings(work, sweeps)
    print("\n".join(findings))
    record(
        __file__,
        "the whole default AoT stage, sweep by sweep (run_sweep, imports excluded), vs another "
        "tree, interleaved repeats; accuracies compared",
        total_before / total_ours,
        ("this tree", total_ours, "s CPU"),
        ("--before tree", total_before, "s CPU"),
        ratio_is="before CPU seconds / ours (sum of the sweeps' medians)",
        repeats=args.repeats,
        settings={"sweeps": sweeps, "matmul_gflops_median": round(flops, 1)},
        other_ratios={f"{s} before/ours": before[s] / ours[s] for s in sweeps},
        summary=f"largest accuracy difference {gap:.4f}; {findings[0]}; {findings[-1]}",
    )
    print(f"RATIO {total_before / total_ours:.2f}")


if __name__ == "__main__":
    main()
