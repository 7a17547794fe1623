"""The whole default synthetic stage (paper A's sweeps), CPU seconds per sweep: this code vs
another tree.

Every sweep of ``config.yaml``'s ``synthetic`` section runs as the rule runs it
(``workflow/scripts/train_synthetic.py``): its own process, one thread,
``time.process_time()`` around :func:`memcap.synthetic.sweep.run_sweep` (so a sweep pays its
own one-off costs, certification included, as a Snakemake job does). ``--before PATH`` runs the
same resolved config through the package of another checkout (``PATH/src``, e.g.
``git worktree add ../synth_before 9953d94``), sweep by sweep, and compares the replicas'
memorized counts (training is chaotic at float-rounding level, so a changed summation order
may move a few). Prints one line per sweep, the totals, how many replicas' counts differ and
by how much at most, the machine's single-thread float32 1024² matmul GFLOP/s, and
``RATIO before/ours`` of the stage's CPU seconds.

    .venv/bin/python benchmarks/bench_synthetic_stage.py --before ../synth_before
    .venv/bin/python benchmarks/bench_synthetic_stage.py --sweeps context_size   # ours only
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from _results import record
from _stage import time_stage

KEYS = ["sweep", "H", "n", "d_h", "context", "task", "T", "seed"]


def worker(config_json: str, sweep: str, table_out: str) -> None:
    """Run one sweep in this process and print its CPU seconds as JSON."""
    import torch

    from memcap.synthetic.settings import StageSettings, sweep_spec
    from memcap.synthetic.sweep import run_sweep

    torch.set_num_threads(1)
    config = json.loads(Path(config_json).read_text())
    section = config["synthetic"]
    engine = (config["engine"],) if "engine" in config else ()  # none in an older tree's
    stage = StageSettings.from_config(section, config["seed"], *engine)
    spec = sweep_spec(section, sweep)
    start = time.process_time()
    result = run_sweep(spec, stage, torch.device("cpu"))
    cpu = time.process_time() - start
    result.table.to_csv(table_out, index=False)
    print(json.dumps({"sweep": sweep, "cpu": cpu, "rows": len(result.table)}))


def memorized_differences(work: Path, sweep: str) -> tuple[int, int, int, int]:
    """Replicas of ``sweep`` trained by both trees, how many of them memorized a different
    count, the largest |difference|, and the replicas only one tree trained (a series whose
    ladder took another T in one tree: training is chaotic at float-rounding level)."""
    import pandas as pd

    ours = pd.read_csv(work / f"ours_{sweep}.csv")
    before = pd.read_csv(work / f"before_{sweep}.csv")
    both = ours.merge(before, on=KEYS, suffixes=("", "_before"), validate="one_to_one")
    alone = len(ours) + len(before) - 2 * len(both)
    gap = (both["memorized"] - both["memorized_before"]).abs()
    return len(both), int((gap > 0).sum()), int(gap.max()) if len(gap) else 0, alone


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(*sys.argv[2:5])
        return
    timings = time_stage(__file__, "synthetic", __doc__.splitlines()[0])
    if timings is None:
        return
    before, ours, sweeps, work = timings.before, timings.ours, timings.sweeps, timings.work
    print(f"{'sweep':<12} {'before s':>9} {'ours s':>8} {'ratio':>6}  memorized differs")
    differing = replicas_in_all = one_tree = 0
    for sweep in sweeps:
        ratio = before[sweep] / ours[sweep]
        replicas, differ, worst, alone = memorized_differences(work, sweep)
        differing, replicas_in_all = differing + differ, replicas_in_all + replicas
        one_tree += alone
        print(
            f"{sweep:<12} {before[sweep]:9.1f} {ours[sweep]:8.1f} {ratio:6.2f}"
            f"  {differ}/{replicas} (max {worst}); {alone} in one tree only"
        )
    total_before, total_ours = sum(before.values()), sum(ours.values())
    print(f"{'total':<12} {total_before:9.1f} {total_ours:8.1f}")
    record(
        __file__,
        "paper A's whole default stage, sweep by sweep (own process, one thread), vs another "
        "tree; memorized counts compared",
        total_before / total_ours,
        ("this tree", total_ours, "s CPU"),
        ("--before tree", total_before, "s CPU"),
        ratio_is="before CPU seconds / ours (the stage's total)",
        repeats=1,
        settings={"sweeps": sweeps},
        other_ratios={f"{s} before/ours": before[s] / ours[s] for s in sweeps},
        summary=f"memorized counts differ on {differing} of {replicas_in_all} replicas trained by "
        f"both trees; {one_tree} replicas trained by one tree only",
    )
    print(f"RATIO {total_before / total_ours:.2f}")


if __name__ == "__main__":
    main()
