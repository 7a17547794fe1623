"""One AoT training step, CPU per step: this tree's model and step vs another tree's.

Each shape is a batched model of the default run (the authors' recipe and variant, one
batch of each replica's sample, fused Adam): ``heads`` (N = 50, d = d_h = 10, H = 1, 11, 21,
31 × 3 seeds, batches of 256), ``head_dim`` (d_h = 1 … 10 padded), ``embed_dim`` (d = 5 …
15), ``low_dim`` (N = 10, d = 2: 100 distinct rows a step, as counted batches compute them),
``aot7`` / ``aot10`` (aot_vs_mlp's AoT facets, batches of 1,024) and ``mlp7`` / ``mlp0``
(its MLP-Transformer of width 140, and its one-head model without MLP: one head, where the
merged heads cost most against a per-head form). A worker process builds the tree's step (this
tree: :class:`memcap.aot.model.AoTStep` on the model's forward; a tree with
``memcap.aot.engine``: its ``FastStep``) and prints the median CPU seconds
(``time.process_time``) of ``--repeats`` rounds of 20 steps. With ``--before PATH`` the two
trees alternate shape by shape, ``--rounds`` times, in fresh processes (the machine may be
shared); each tree's median over rounds is kept. Prints the single-thread float32 1024²
matmul GFLOP/s and ``RATIO before/ours`` of the summed step times.

    .venv/bin/python benchmarks/bench_aot.py --before ../aot_before --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _results import record
from _stage import ROOT, matmul_gflops

# shape -> (N, batch, replicas as (model, d, d_h, H, width), seeds)
SHAPES = {
    "heads": (50, 256, [("aot", 10, 10, h, 0) for h in (1, 11, 21, 31)]),
    "head_dim": (50, 256, [("aot", 10, dh, 20, 0) for dh in (1, 2, 4, 6, 8, 10)]),
    "embed_dim": (50, 256, [("aot", d, min(d, 10), 20, 0) for d in (5, 7, 9, 11, 13, 15)]),
    "low_dim": (10, 100, [("aot", 2, 2, h, 0) for h in (1, 6, 11, 16, 21)]),
    "aot7": (70, 1024, [("aot", 7, 7, h, 0) for h in (1, 6, 11)]),
    "aot10": (70, 1024, [("aot", 10, 10, h, 0) for h in (1, 6, 11)]),
    "mlp7": (70, 1024, [("mlp", 7, 7, 1, 140)]),
    "mlp0": (70, 1024, [("mlp", 10, 10, 1, 0)]),
}
SEEDS = 3


def worker(shape: str, repeats: int) -> None:
    """Time one step of ``shape`` with this process's package; print ms per step as JSON."""
    import torch

    from memcap.aot.model import ReplicaTransformer
    from memcap.aot.settings import Setting
    from memcap.aot.tasks import association_task
    from memcap.training.config import TrainConfig

    try:
        from memcap.training.loop import keep_freed_memory
        from memcap.training.step import FusedAdam
    except ImportError:
        try:  # a tree with the replicas' state in its own module
            from memcap.training.active import FusedAdam

            from memcap.training.loop import keep_freed_memory
        except ImportError:  # a tree with a module per part of the training step
            from memcap.training.adam import FusedAdam
            from memcap.training.allocator import keep_freed_memory
    try:
        from memcap.aot.model import AoTStep as Step
    except ImportError:
        try:  # a tree with the step in its own module
            from memcap.aot.step import AoTStep as Step
        except ImportError:  # a tree with the fast engine
            from memcap.aot.engine import FastStep as Step

    torch.set_num_threads(1)
    keep_freed_memory()
    N, batch, kinds = SHAPES[shape]
    settings = [
        Setting("bench", "association", m, N, 2, d, d_h, H, 1, w, 1.0, "code")
        for m, d, d_h, H, w in kinds
        for _ in range(SEEDS)
    ]
    model = ReplicaTransformer(settings, list(range(len(settings))))
    tasks = [association_task(N, 2, r) for r in range(len(settings))]
    rows = torch.randint(N**2, (batch,), generator=torch.Generator().manual_seed(0))
    tokens = torch.stack([t.inputs[rows] for t in tasks])
    targets = torch.stack([t.targets[rows] for t in tasks])
    weights = torch.full(targets.shape, 1.0 / batch)
    cfg = TrainConfig(
        steps=1, lr=1e-2, warmup_frac=0.0, schedule="constant", batch_size=batch,
        eval_every=1, early_stop=False, regression_tol=None,
    )  # fmt: skip
    step = Step(cfg, torch.device("cpu"))
    adam = FusedAdam(model.parameters())

    def one() -> None:
        adam.zero_grad()
        step(model, (tokens,), targets, weights, "classification")
        adam.step(1e-2)

    one()
    rounds = []
    for _ in range(repeats):
        start = time.process_time()
        for _ in range(20):
            one()
        rounds.append((time.process_time() - start) / 20)
    print(json.dumps({"shape": shape, "ms": 1000 * statistics.median(rounds)}))


def run(src: Path, shape: str, repeats: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    args = [sys.executable, __file__, "worker", shape, str(repeats)]
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{src} {shape} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["ms"]


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2], int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="another checkout to compare against")
    parser.add_argument("--shapes", nargs="*", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--rounds", type=int, default=3, help="interleaved runs of each tree")
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds of 20 steps")
    args = parser.parse_args()
    trees = {"ours": ROOT / "src"} | ({} if args.before is None else {"before": args.before})
    trees = {tag: path if tag == "ours" else path / "src" for tag, path in trees.items()}
    print(f"single-thread float32 1024^2 matmul: {matmul_gflops():.0f} GFLOP/s", flush=True)
    ms: dict[str, dict[str, list[float]]] = {tag: {s: [] for s in args.shapes} for tag in trees}
    for _ in range(args.rounds):
        for shape in args.shapes:
            for tag in sorted(trees):
                ms[tag][shape].append(run(trees[tag], shape, args.repeats))
    median = {tag: {s: statistics.median(v) for s, v in ms[tag].items()} for tag in ms}
    for shape in args.shapes:
        line = "  ".join(f"{tag} {median[tag][shape]:7.2f}" for tag in sorted(median))
        ratio = median["before"][shape] / median["ours"][shape] if "before" in median else None
        print(f"{shape:<10} {line} ms/step" + ("" if ratio is None else f"  ratio {ratio:.2f}"))
    if "before" not in median:
        return
    ours, before = sum(median["ours"].values()), sum(median["before"].values())
    before_ms = median["before"]
    record(
        __file__,
        "one AoT training step (model, loss, backward, fused Adam) per default batched model, "
        "this tree vs another, interleaved rounds",
        before / ours,
        ("this tree", ours, "ms CPU, summed over the shapes"),
        ("--before tree", before, "ms CPU, summed over the shapes"),
        ratio_is="before ms / ours ms (summed over the shapes)",
        repeats=args.rounds,
        settings=args,
        other_ratios={f"{s} before/ours": b / median["ours"][s] for s, b in before_ms.items()},
    )
    print(f"RATIO before/ours {before / ours:.2f}")


if __name__ == "__main__":
    main()
