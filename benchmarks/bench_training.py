"""Replicas of paper A's MHA model trained per second: batched vs one at a time.

The default run's heads sweep at one dataset size (H = 1 … 6, shared and random contexts, two
seeds: 24 replicas, d = 16, n = 8, d_h = 8, C = 50, T = 64 full batch), trained for the same
number of steps (no early stop) through :func:`memcap.training.loop.train_replicas` three ways
in one process:

- batched: one model for all replicas, each distinct dataset stored once and every replica's
  heads stacked on it (the pipeline's way);
- per-shape: one batched model per head count (no masked work, more models);
- one at a time: a separate model per replica (the naive way).

Prints replicas per second for each; the last line is ``RATIO <batched / one-at-a-time>``.

    .venv/bin/python benchmarks/bench_training.py --steps 200 --threads 1
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import torch
from _results import record

from memcap.synthetic.model import MHAShape, ReplicaMHA
from memcap.synthetic.tasks import make_dataset
from memcap.training.config import TrainConfig
from memcap.training.data import ReplicaData
from memcap.training.loop import train_replicas

D, N, HEAD_DIM, CLASSES = 16, 8, 8, 50


def replicas(examples: int) -> list[tuple[MHAShape, int, object]]:
    """(shape, seed, dataset) of every replica of the benchmark sweep."""
    data = {
        (context, seed): make_dataset(examples, N, D, context, "classification", CLASSES, seed)
        for context in ("shared", "random")
        for seed in (0, 1)
    }  # paired across H, as the sweeps' data are
    return [
        (MHAShape(D, N, heads, HEAD_DIM, classes=CLASSES), 100 * heads + seed, data[context, seed])
        for heads in range(1, 7)
        for context in ("shared", "random")
        for seed in (0, 1)
    ]


def train_seconds(members: list, cfg: TrainConfig) -> float:
    """Wall time to build and train one batched model of ``members`` (datasets they share
    stored once, as :mod:`memcap.synthetic.sweep` stores them)."""
    start = time.perf_counter()
    shapes, seeds = [m[0] for m in members], [m[1] for m in members]
    sets = list({id(m[2]): m[2] for m in members}.values())
    row = {id(s): k for k, s in enumerate(sets)}
    source = [row[id(m[2])] for m in members]
    data = ReplicaData(
        (torch.stack([s.queries for s in sets]), torch.stack([s.contexts for s in sets])),
        torch.stack([m[2].targets for m in members]),
        torch.tensor([len(m[2].targets) for m in members]),
        torch.tensor(source) if len(sets) < len(members) else None,
    )
    train_replicas(ReplicaMHA(shapes, seeds), data, "classification", cfg, seeds)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="training steps per replica")
    parser.add_argument("--examples", type=int, default=64, help="T, full batch")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--repeats", type=int, default=5, help="timings of each way")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    # The default run's synthetic.train settings, without early stop.
    cfg = TrainConfig(
        steps=args.steps,
        lr=0.03,
        warmup_frac=0.05,
        schedule="cosine",
        batch_size=None,
        eval_every=50,
        early_stop=False,
        regression_tol=0.01,
    )
    members = replicas(args.examples)
    train_seconds(members[:1], dataclasses.replace(cfg, steps=5))  # warm-up: imports, allocator

    by_shape = {}
    for m in members:
        by_shape.setdefault(m[0], []).append(m)
    runs = []  # the three ways interleaved, so a drift of the machine's speed hits each alike
    for _ in range(args.repeats):
        batched = train_seconds(members, cfg)
        per_shape = sum(train_seconds(group, cfg) for group in by_shape.values())
        single = sum(train_seconds([m], cfg) for m in members)
        runs.append((batched, per_shape, single))
    batched, per_shape, single = (statistics.median(way) for way in zip(*runs, strict=True))
    ratio = statistics.median(s / b for b, _, s in runs)

    count = len(members)
    print(f"{count} replicas, {args.steps} steps, T = {args.examples}, {args.threads} thread(s)")
    for name, seconds in (
        ("batched", batched),
        ("per-shape", per_shape),
        ("one-at-a-time", single),
    ):
        print(f"{name:<14} {seconds:7.2f} s  {count / seconds:7.2f} replicas/s (median)")
    record(
        __file__,
        f"{count} replicas of paper A's model trained one batched model vs one at a time "
        f"({args.steps} steps, T = {args.examples}, {args.threads} thread(s))",
        ratio,
        ("batched", batched, "s wall"),
        ("one at a time", single, "s wall"),
        ratio_is="one-at-a-time seconds / batched seconds, median of the repeats' ratios",
        repeats=args.repeats,
        settings=args,
        other_ratios={"per-shape/batched": per_shape / batched},
        summary="ratios " + ", ".join(f"{s / b:.2f}" for b, _, s in runs),
    )
    print(f"RATIO {ratio:.2f}")


if __name__ == "__main__":
    main()
