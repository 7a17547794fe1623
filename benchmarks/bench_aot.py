"""AoT training step: token tables + padded replicas (ours) vs the naive alternatives.

One full-batch Adam step on paper B's H sweep (N = 50, S = 2, d = d_h = 10, H = 1, 6, ..., 31;
``--N`` and ``--d`` change the setting) for every replica, timed three ways in one process on
the same replicas:

- ours: one padded model for all shapes, first layer through the token tables;
- per-shape: the token-table path, one model per distinct shape (no padding);
- naive: one padded model through the per-example path (every example's q, k, v).

``--batch 256 --variant authors`` times the authors' recipe instead: a mini-batch step of
their AoT variant, where "ours" gathers one token-table row per example and position.

The median of ``--repeats`` steps is printed for each; the last lines are
``RATIO per-shape/ours`` and ``RATIO naive/ours``.

    .venv/bin/python benchmarks/bench_aot.py --seeds 2 --threads 1
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from memcap.aot.model import ReplicaTransformer
from memcap.aot.settings import Setting
from memcap.aot.tasks import association_task


def step_seconds(settings, seeds, per_example: bool, repeats: int, batch: int | None) -> float:
    """Median wall time of one training step (full batch, or ``batch`` examples per replica)."""
    model = ReplicaTransformer(settings, seeds)
    tasks = [association_task(s.N, s.S, seed) for s, seed in zip(settings, seeds, strict=True)]
    tokens = torch.stack([t.inputs for t in tasks])
    targets = torch.stack([t.targets for t in tasks])
    if batch is not None:
        rows = torch.randint(tokens.shape[1], (batch,), generator=torch.Generator().manual_seed(0))
        tokens, targets = tokens[:, rows], targets[:, rows]
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    times = []
    for _ in range(repeats + 1):  # the first step warms up
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        logits = model.sequence_logits(tokens)[:, :, -1] if per_example else model(tokens)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2, help="replicas per head count")
    parser.add_argument("--repeats", type=int, default=5, help="timed steps per variant")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--N", type=int, default=50, help="dictionary size (T0 = N^2)")
    parser.add_argument("--d", type=int, default=10, help="embedding = head dimension")
    parser.add_argument("--batch", type=int, default=None, help="examples per step (full)")
    parser.add_argument("--variant", default="paper", choices=["paper", "authors"])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    heads = [1, 6, 11, 16, 21, 26, 31]
    settings = [
        Setting("bench", "association", "aot", args.N, 2, args.d, args.d, h, variant=args.variant)
        for h in heads
    ]
    replicas = [(s, k) for s in settings for k in range(args.seeds)]
    all_settings, all_seeds = [s for s, _ in replicas], [k for _, k in replicas]

    ours = step_seconds(all_settings, all_seeds, False, args.repeats, args.batch)
    per_shape = sum(
        step_seconds([s] * args.seeds, list(range(args.seeds)), False, args.repeats, args.batch)
        for s in settings
    )
    naive = step_seconds(all_settings, all_seeds, True, args.repeats, args.batch)
    print(f"replicas {len(replicas)}, T0 = {args.N**2}, batch {args.batch or 'full'}")
    print(f"ours (padded, token tables)  {1000 * ours:8.1f} ms/step")
    print(f"per-shape (token tables)     {1000 * per_shape:8.1f} ms/step")
    print(f"naive (per-example path)     {1000 * naive:8.1f} ms/step")
    print(f"RATIO per-shape/ours {per_shape / ours:.2f}")
    print(f"RATIO naive/ours {naive / ours:.2f}")


if __name__ == "__main__":
    main()
