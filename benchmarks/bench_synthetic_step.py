"""Paper A's synthetic training step against one thread's matmul speed.

Trains every batched model (one per T) of the default ``config.yaml``'s heads sweep for
``--steps`` steps (one full-data evaluation per 50 steps, as in the run) through
:func:`memcap.training.loop.train_replicas`, two ways in one process:

- new: the model (``ReplicaMHA.forward``: folded weights, every replica its own rows; the
  pipeline's way);
- old: the textbook forward of the same parameters (``tests/helpers/mha_oracle.py``, the
  tests' oracle: every token embedded, per-head einsums, one replica after another),

both through autograd and the loop's own loss, in the same loop (fused Adam for both).

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
all. They are timed alone at the sweep's exact shapes, two ways (every replica padded to
H_max heads, as the new way does; one product per head count), each with its fastest of
bmm/einsum layouts, and the fastest way counts: t_p seconds. ``CEILING <F_p / t_p / matmul>``
is their speed as a fraction of matmul speed, and ``BOUND <needed / t_p / matmul>`` =
CEILING / (F_p / needed) is the whole step's RATIO if everything but these products took no
time.

Where the step's time goes: one more run of each model under ``torch.profiler`` gives the
CPU time of its ops by kind: BLAS calls (bmm, baddbmm, mm, addmm: every product the step
runs, needed or not), element-wise math (softmaxes, the loss's exponentials, the mixing's
multiplies and sums, every other computing op), copies (copy, cat, index_select and other
ops that only move or fill memory) and the optimizer (fused Adam); what the median
unprofiled step takes beyond these is the rest: Python, dispatch, views and autograd's
bookkeeping. ``SPLIT`` prints them beside the 30% budget (needed FLOPs / (0.3 · matmul
FLOP/s)): a step meets it only if they all fit in it together.

    .venv/bin/python benchmarks/bench_synthetic_step.py --steps 50 --threads 1
    .venv/bin/python benchmarks/bench_synthetic_step.py configs/test.yaml --steps 2  # smoke
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

import torch
import yaml
from _results import record
from torch.profiler import ProfilerActivity, profile

from memcap.synthetic.settings import Replica, StageSettings, step_cost, step_shape, sweep_spec
from memcap.synthetic.sweep import batched_model, sweep_groups
from memcap.training.loop import train_replicas
from memcap.training.step import AutogradStep

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "helpers"))
from mha_oracle import textbook_forward  # noqa: E402  (the tests' oracle)


class TextbookStep(AutogradStep):
    """The loop's step through the textbook forward."""

    name = "textbook"

    def outputs(self, model, inputs):
        return textbook_forward(model, *inputs)


BLAS_OPS = frozenset({"aten::bmm", "aten::baddbmm", "aten::baddbmm_", "aten::mm", "aten::addmm"})
COPY_OPS = frozenset(
    "aten::" + name
    for name in (
        "copy_", "cat", "index_select", "index_add_", "clone", "fill_", "zero_", "zeros",
        "new_zeros", "constant_pad_nd", "_to_copy", "contiguous", "empty", "empty_like",
        "empty_strided", "stack",
    )
)  # fmt: skip
# matmul, pad and to only dispatch to the ops counted under their own names
VIEW_OPS = frozenset(
    "aten::" + name
    for name in (
        "view", "reshape", "_reshape_alias", "_unsafe_view", "transpose", "permute", "t",
        "as_strided", "slice", "select", "narrow", "unsqueeze", "squeeze", "expand", "alias",
        "detach", "matmul", "pad", "to", "resolve_conj", "resolve_neg", "lift_fresh",
    )
)  # fmt: skip
KINDS = ("BLAS", "element-wise", "copies", "Adam")


def op_kind(name: str) -> str | None:
    """The SPLIT kind of a profiled op (docstring), None for what counts as the rest."""
    if name in BLAS_OPS:
        return "BLAS"
    if name in COPY_OPS:
        return "copies"
    if "adam" in name or name.startswith("aten::_foreach"):
        return "Adam"
    if name.startswith("aten::") and name not in VIEW_OPS:
        return "element-wise"
    return None


def needed_flops(members: list[Replica], stage: StageSettings) -> float:
    """FLOPs one full-batch training step of ``members`` needs (the docstring's formula:
    :meth:`memcap.synthetic.buckets.StepCost.needed`)."""
    return sum(
        step_cost(stage, r.setting.task, eval_every=1).needed(step_shape(r, None)) for r in members
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


def primitive_seconds(members: list[Replica], data, stage) -> tuple[float, float]:
    """F_p and t_p (docstring) of one batched model: the per-example products of its real
    heads, timed padded and per head count."""
    examples, n, d = data.inputs[1].shape[1:3] + (stage.d,)  # padded to the longest T
    heads = [r.setting.H for r in members]
    flops = sum(4.0 * r.T * r.setting.H * n * d for r in members)
    padded = product_seconds(examples * len(heads), max(heads), n, d)
    per_count = sum(product_seconds(examples * heads.count(h), h, n, d) for h in sorted(set(heads)))
    return flops, min(padded, per_count)


def train_seconds(spec, stage, members, datasets, steps: int, old: bool) -> float:
    """CPU seconds to train one batched model for ``steps`` steps."""
    cpu = torch.device("cpu")
    cfg = dataclasses.replace(  # exactly ``steps`` steps: no extra budgets, nobody leaves
        stage.train_config(spec, members[0].T),
        steps=steps,
        extra_budgets=0,
        leave_when_fit=False,
    )
    model, data, seeds = batched_model(spec, stage, members, datasets, cpu, cfg.batch_size)
    step = TextbookStep(cfg, cpu) if old else AutogradStep(cfg, cpu)
    start = time.process_time()
    train_replicas(model, data, members[0].setting.task, cfg, seeds, step=step)
    return time.process_time() - start


def kind_seconds(spec, stage, members, datasets, steps: int) -> dict[str, float]:
    """CPU seconds per step of each kind of op (:func:`op_kind`) in one profiled run."""
    with profile(activities=[ProfilerActivity.CPU]) as run:
        train_seconds(spec, stage, members, datasets, steps, False)
    seconds = dict.fromkeys(KINDS, 0.0)
    for event in run.key_averages():
        kind = op_kind(event.key)
        if kind is not None:
            seconds[kind] += event.self_cpu_time_total / 1e6 / steps
    return seconds


def model_row(spec, stage, members, datasets, steps: int, repeats: int) -> dict[str, float]:
    """One batched model's needed FLOPs, old and new seconds per step (medians), the new
    step's seconds per kind of op (:data:`KINDS`) and its per-example products' F_p and t_p."""
    times = {way: [] for way in ("old", "new")}
    for _ in range(repeats):
        for way in times:
            seconds = train_seconds(spec, stage, members, datasets, steps, way == "old")
            times[way].append(seconds / steps)
    batch_size = stage.group_config(spec, members).batch_size
    _, data, _ = batched_model(spec, stage, members, datasets, torch.device("cpu"), batch_size)
    p_flops, p_seconds = primitive_seconds(members, data, stage)
    return {
        "needed": needed_flops(members, stage),
        "old": statistics.median(times["old"]),
        "new": statistics.median(times["new"]),
        **kind_seconds(spec, stage, members, datasets, steps),
        "p_flops": p_flops,
        "p_seconds": p_seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default="config.yaml", help="workflow config")
    parser.add_argument("--steps", type=int, default=50, help="training steps per model")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--repeats", type=int, default=3, help="timings per way (median)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from snakemake.utils import validate  # fills the schema's defaults

    config = yaml.safe_load((ROOT / args.config).read_text())
    validate(config, str(ROOT / "workflow" / "schemas" / "config.schema.yaml"))
    section = config["synthetic"]
    stage = StageSettings.from_config(section, config["seed"], config["engine"])
    spec = sweep_spec(section, "heads")
    groups, datasets = sweep_groups(spec, stage)
    for members in groups.values():  # warm-up: first calls, allocator
        for old in (True, False):
            train_seconds(spec, stage, members, datasets, 2, old)
    matmul = [matmul_flops()]
    print(f"heads sweep of {args.config}, {args.steps} steps per model, {args.threads} thread(s)")
    print(
        "T     replicas  needed MFLOP/step  old ms/step  new ms/step  new GFLOP/s  products ms"
        "  | ms: BLAS  element-wise  copies  Adam  rest"
    )
    total = dict.fromkeys(("needed", "old", "new", *KINDS, "p_flops", "p_seconds"), 0.0)
    for members in groups.values():
        row = model_row(spec, stage, members, datasets, args.steps, args.repeats)
        total = {key: total[key] + row[key] for key in total}
        print(
            f"{max(r.T for r in members):<5} {len(members):>8}  "
            f"{row['needed'] / 1e6:17.1f}  {1e3 * row['old']:11.2f}  {1e3 * row['new']:11.2f}  "
            f"{row['needed'] / row['new'] / 1e9:11.2f}  {1e3 * row['p_seconds']:11.2f}  "
            f"| {1e3 * row['BLAS']:8.2f}  {1e3 * row['element-wise']:12.2f}  "
            f"{1e3 * row['copies']:6.2f}  {1e3 * row['Adam']:4.2f}  "
            f"{1e3 * (row['new'] - sum(row[kind] for kind in KINDS)):4.2f}"
        )
    matmul.append(matmul_flops())
    peak = statistics.median(matmul)
    needed, primitive = total["needed"], total["p_flops"] / total["p_seconds"]
    print(f"matmul 1024x1024 float32: {peak / 1e9:.1f} GFLOP/s")
    old, new = 1e3 * total["old"], 1e3 * total["new"]
    kinds = {kind: 1e3 * total[kind] for kind in KINDS}
    print(f"sweep step (all models): old {old:.2f} ms, new {new:.2f} ms")
    print(
        f"achieved: old {needed / total['old'] / 1e9:.2f}, "
        f"new {needed / total['new'] / 1e9:.2f} GFLOP/s"
    )
    print(
        f"per-example products: {total['p_flops'] / needed:.3f} of the needed FLOPs, "
        f"{primitive / 1e9:.2f} GFLOP/s in {1e3 * total['p_seconds']:.2f} ms"
    )
    split = ", ".join(f"{kind} {ms:.2f} ms" for kind, ms in kinds.items())
    print(
        f"SPLIT {split}, the rest {new - sum(kinds.values()):.2f} ms; "
        f"30% budget {1e3 * needed / (0.3 * peak):.2f} ms per sweep step"
    )
    print(f"CEILING {primitive / peak:.3f}")
    print(f"BOUND {needed / total['p_seconds'] / peak:.3f}")
    record(
        __file__,
        f"paper A's heads sweep training step ({args.config}, {args.steps} steps, "
        f"{args.threads} thread(s)): the model's achieved FLOP/s as a fraction of one "
        "thread's matmul FLOP/s; the textbook forward beside it",
        needed / total["new"] / peak,
        ("the model", new, "ms CPU per sweep step"),
        ("textbook forward", old, "ms CPU per sweep step"),
        ratio_is="achieved FLOP/s of the model's step / one-thread matmul FLOP/s",
        repeats=args.repeats,
        settings=args,
        other_ratios={
            "textbook/model": total["old"] / total["new"],
            "ceiling": primitive / peak,
            "bound": needed / total["p_seconds"] / peak,
        },
    )
    print(f"RATIO {needed / total['new'] / peak:.3f}")


if __name__ == "__main__":
    main()
