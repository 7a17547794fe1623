"""Paper A's synthetic training step against one thread's matmul speed.

Trains every batched model (one per T) of the default ``config.yaml``'s heads sweep for
``--steps`` steps (one full-data evaluation per 50 steps, as in the run) through
:func:`memcap.training.loop.train_replicas`, two ways in one process:

- new: ``ReplicaMHA.weighted_loss`` (parameters to loss in one autograd function: folded
  weights, the loss inside, everything's backward by hand; the pipeline's way);
- old: ``ReplicaMHA.reference_forward`` (every token embedded, per-head einsums) and the
  loop's own loss, through autograd, in the same loop (fused Adam for both).

Arithmetic the model needs per step, summed over replicas r with H_r real (unpadded) heads,
T_r examples, d, d_h, d_v, n and C classes (C = 1 for regression):

    3 · T_r · [ H_r · (2 d d_h + 2 d_h d + 2 n d + 2 n d + 2 d d_v + 2 d_v d) + 2 d C ]

(forward matmul FLOPs of the query projection, q·W_k, scores against the n context rows, the
weighted context, its value projection and output projection per head, and the decoder;
x 3 for forward and backward). The embedding of the tokens is not counted: the new way does
not compute it. Achieved FLOP/s = needed FLOPs / CPU seconds of training; one thread's
float32 1024 x 1024 matmul FLOP/s is measured in the same run (before and after, median).
The last line is ``RATIO <achieved / matmul>`` of the new way over the whole sweep.

What bounds it, measured beside it: the products no form of the step avoids, each example's
n x d context against every real head's d-vector (scores, forward) and its n-vector (the
score gradient's pull-back to u, backward): 2 · 2 n d FLOPs per example and real head, F_p in
all. They are timed alone at the sweep's exact shapes, three ways (every replica padded to
H_max heads; one product per head count; the heads of replicas that read the same inputs
stacked as rows, as the new way does), each with its fastest of bmm/einsum layouts, and the
fastest way counts: t_p seconds. ``CEILING <F_p / t_p / matmul>`` is their speed as a
fraction of matmul speed, and ``BOUND <needed / t_p / matmul>`` = CEILING / (F_p / needed)
is the whole step's RATIO if everything but these products took no time.

    .venv/bin/python benchmarks/bench_synthetic_step.py --steps 50 --threads 1
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from pathlib import Path

import torch
import yaml

from memcap.synthetic.head_slots import head_slots
from memcap.synthetic.settings import Replica, StageSettings, step_cost, step_shape, sweep_spec
from memcap.synthetic.sweep import batched_model, sweep_groups
from memcap.training.loop import train_replicas

ROOT = Path(__file__).resolve().parents[1]


def needed_flops(members: list[Replica], stage: StageSettings, examples: int) -> float:
    """FLOPs one training step of ``members`` needs on batches of ``examples`` (the
    docstring's formula: :meth:`memcap.synthetic.buckets.StepCost.needed`)."""
    return sum(
        step_cost(stage, r.setting.task, eval_every=1).needed(step_shape(r, examples))
        for r in members
    )


def matmul_flops(repeats: int = 20) -> float:
    """Median float32 1024 x 1024 matmul FLOP/s (CPU time) on the current threads."""
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    a @ b
    times = []
    for _ in range(repeats):
        start = time.process_time()
        a @ b
        times.append(time.process_time() - start)
    return 2 * 1024**3 / statistics.median(times)


def _seconds(run, repeats: int = 15) -> float:
    """Median CPU seconds of ``run()`` after one warm-up call."""
    run()
    times = []
    for _ in range(repeats):
        start = time.process_time()
        run()
        times.append(time.process_time() - start)
    return statistics.median(times)


def product_seconds(examples: int, heads: int, n: int, d: int) -> float:
    """Fastest forward plus fastest backward per-example product of ``heads`` rows."""
    context = torch.rand(examples, n, d)
    u, pull = torch.rand(examples, heads, d), torch.rand(examples, heads, n)
    forward = (
        lambda: torch.bmm(u, context.transpose(1, 2)),
        lambda: torch.bmm(context, u.transpose(1, 2)),  # scores transposed
        lambda: torch.einsum("bhk,bik->bhi", u, context),
    )
    backward = (
        lambda: torch.bmm(pull, context),
        lambda: torch.bmm(context.transpose(1, 2), pull.transpose(1, 2)),  # transposed
        lambda: torch.einsum("bhi,bik->bhk", pull, context),
    )
    return min(map(_seconds, forward)) + min(map(_seconds, backward))


def primitive_seconds(members: list[Replica], data, stage: StageSettings) -> tuple[float, float]:
    """F_p and t_p (docstring) of one batched model: the per-example products of its real
    heads, timed padded, per head count and stacked over replicas with identical inputs."""
    examples, n, d = members[0].examples, data.inputs[1].shape[2], stage.d
    heads = [r.setting.heads for r in members]
    flops = sum(4.0 * examples * h * n * d for h in heads)
    padded = product_seconds(examples * len(heads), max(heads), n, d)
    per_count = sum(product_seconds(examples * heads.count(h), h, n, d) for h in sorted(set(heads)))
    slots = head_slots(*data.inputs, heads, max(heads))
    stacked = product_seconds(examples * slots.groups, slots.slots, n, d)
    return flops, min(padded, per_count, stacked)


def train_seconds(spec, stage, members, datasets, steps: int, old: bool) -> float:
    """CPU seconds to train one batched model for ``steps`` steps."""
    model, data, seeds = batched_model(spec, stage, members, datasets, torch.device("cpu"))
    if old:
        model.forward = model.reference_forward
        model.weighted_loss = None  # the loop's own loss, through autograd
    cfg = dataclasses.replace(stage.train_config(spec, members[0].examples), steps=steps)
    start = time.process_time()
    train_replicas(model, data, members[0].setting.task, cfg, seeds)
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50, help="training steps per model")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--repeats", type=int, default=3, help="timings per way (median)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from snakemake.utils import validate  # fills the schema's defaults

    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    validate(config, str(ROOT / "workflow" / "schemas" / "config.schema.yaml"))
    section = config["synthetic"]
    stage = StageSettings.from_config(section, config["seed"])
    spec = sweep_spec(section, "heads")
    groups, datasets = sweep_groups(spec, stage)
    for members in groups.values():  # warm-up: first calls, allocator
        for old in (True, False):
            train_seconds(spec, stage, members, datasets, 2, old)
    matmul = [matmul_flops()]
    needed = new_total = old_total = primitive_flops = primitive_total = 0.0
    print(f"heads sweep of config.yaml, {args.steps} steps per model, {args.threads} thread(s)")
    print("T     replicas  needed MFLOP/step  old ms/step  new ms/step  new GFLOP/s  products ms")
    for members in groups.values():
        examples = members[0].examples
        times = {way: [] for way in ("old", "new")}
        for _ in range(args.repeats):
            for way in times:
                seconds = train_seconds(spec, stage, members, datasets, args.steps, way == "old")
                times[way].append(seconds / args.steps)
        old, new = (statistics.median(times[way]) for way in ("old", "new"))
        flops = needed_flops(members, stage, examples)
        data = batched_model(spec, stage, members, datasets, torch.device("cpu"))[1]
        p_flops, p_seconds = primitive_seconds(members, data, stage)
        primitive_flops, primitive_total = primitive_flops + p_flops, primitive_total + p_seconds
        needed, new_total, old_total = needed + flops, new_total + new, old_total + old
        print(
            f"{examples:<5} {len(members):>8}  {flops / 1e6:17.1f}  {1e3 * old:11.2f}  "
            f"{1e3 * new:11.2f}  {flops / new / 1e9:11.2f}  {1e3 * p_seconds:11.2f}"
        )
    matmul.append(matmul_flops())
    peak = statistics.median(matmul)
    print(f"matmul 1024x1024 float32: {peak / 1e9:.1f} GFLOP/s")
    print(f"sweep step (all models): old {1e3 * old_total:.2f} ms, new {1e3 * new_total:.2f} ms")
    achieved = {"old": needed / old_total / 1e9, "new": needed / new_total / 1e9}
    print(f"achieved: old {achieved['old']:.2f}, new {achieved['new']:.2f} GFLOP/s")
    print(
        f"per-example products: {primitive_flops / needed:.3f} of the needed FLOPs, "
        f"{primitive_flops / primitive_total / 1e9:.2f} GFLOP/s in {1e3 * primitive_total:.2f} ms"
    )
    print(f"CEILING {primitive_flops / primitive_total / peak:.3f}")
    print(f"BOUND {needed / primitive_total / peak:.3f}")
    print(f"RATIO {needed / new_total / peak:.3f}")


if __name__ == "__main__":
    main()
