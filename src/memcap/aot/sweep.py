"""Train every setting × seed of one AoT sweep through the shared training loop.

Replicas (setting × seed) are grouped into one batched model per (task, N, S, depth, model,
variant, MLP width); within a group, shapes (H, d_h, d) differ and are zero-padded and masked
(see :mod:`memcap.aot.model`); a sweep's facets train apart (:func:`group_replicas`). With
``pad_replicas = False`` every distinct shape trains alone. Every group trains through
:func:`memcap.training.loop.train_replicas` with :class:`memcap.aot.step.AoTStep`: the
model's forward and autograd's backward.

Two recipes. ``ours`` trains on all N^S inputs and scores the best evaluation's accuracy on
them. ``authors`` (the authors' published code) trains on a fixed sample drawn from the
uniform prior in shuffled epochs and scores the mean training-batch accuracy of the last
batches; the accuracy on all N^S inputs of the final model is kept beside it
(``accuracy_table``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch

from memcap.aot import bounds
from memcap.aot.model import ReplicaTransformer
from memcap.aot.settings import GRID_KEYS, Setting, StageSettings, expand_sweep
from memcap.aot.step import AoTStep
from memcap.aot.tasks import Task, association_task, distribution_task, fixed_sample
from memcap.training.data import ReplicaData
from memcap.training.loop import train_replicas
from memcap.training.seeds import derive_seed

_logger = logging.getLogger(__name__)


@dataclass
class SweepResult:
    """One row per replica, the wall time of every batched model and the sweep's training."""

    table: pd.DataFrame
    groups: list[dict[str, Any]]  # replicas and seconds of each batched model
    train: dict[str, Any]  # the sweep's training settings (stage's with the sweep's own)


def x_axis(spec: Mapping[str, Any]) -> str:
    """The plot axis of a sweep: params when models are compared, else the varied key."""
    if "mlp" in spec["models"]:
        return "params"
    order = ("H", "d_h", "d", "N", "S")  # the first varied one is the x axis
    varied = [k for k in order if isinstance(spec[k], list) and len(spec[k]) > 1]
    return varied[0] if varied else "H"


def facet_keys(spec: Mapping[str, Any]) -> list[str]:
    """Other varied keys of a sweep: one curve (and one plot panel) per value."""
    axis = x_axis(spec)
    return [
        k
        for k in GRID_KEYS
        if isinstance(spec[k], list)
        and len(spec[k]) > 1
        and k != axis
        and not (axis == "params" and k == "H")
    ]


def make_task(s: Setting, seed: int, device: torch.device) -> Task:
    if s.task == "association":
        return association_task(s.N, s.S, seed, device)
    return distribution_task(s.N, s.S, seed, s.temperature, device)


def group_replicas(
    replicas: Sequence[tuple[Setting, int]],
    pad: bool,
    split_widths: bool = True,
    apart: Sequence[str] = (),
) -> list[list[tuple[Setting, int]]]:
    """Replicas that can share one batched model, in first-seen order.

    ``split_widths`` keeps MLP widths apart: at full batch, padding a narrow MLP to a wide one
    costs more than a run of its own. Otherwise (mini-batches, where another run's per-step
    overhead weighs more) neighbouring widths share a model while padding adds at most a
    quarter to their MLPs (:func:`width_buckets`). Settings that differ in a key of ``apart``
    (a sweep's facets: :func:`facet_keys`) never share a model: aot_vs_mlp's facet d is the
    residual dimension D, and the merged heads cost D(D + 1) numbers per example, so padding
    d = 7 to 10 costs more than a model of its own.
    """
    keys = [
        (s.task, s.N, s.S, s.depth, s.model, s.variant)
        + (() if pad else s.shape_key())
        + tuple(getattr(s, k) for k in apart)
        for s, _ in replicas
    ]
    widths = [s.width for s, _ in replicas]
    split = split_widths or not pad
    bucket = {w: w for w in widths} if split else width_buckets(widths)
    groups: dict[tuple, list[tuple[Setting, int]]] = {}
    for key, width, replica in zip(keys, widths, replicas, strict=True):
        groups.setdefault(key + (bucket[width],), []).append(replica)
    return list(groups.values())


def width_buckets(widths: Sequence[int], slack: float = 1.25) -> dict[int, int]:
    """Bucket (its narrowest width) of every MLP width: runs of ascending widths whose padding
    to the run's widest costs at most ``slack`` times their own widths (an MLP's cost)."""
    bucket: dict[int, int] = {}
    members: list[int] = []
    for width in sorted(widths):
        if members and (len(members) + 1) * width > slack * (sum(members) + width):
            members = []
        members.append(width)
        bucket[width] = members[0]
    return bucket


def run_sweep(
    name: str,
    spec: Mapping[str, Any],
    stage: StageSettings,
    device: torch.device,
    only: Setting | None = None,
) -> SweepResult:
    """Train every setting × seed of a sweep (``only``: that setting's seeds alone); one row
    per replica, plus run statistics."""
    settings = [s for s in expand_sweep(name, spec) if only in (None, s)]
    replicas = [(s, seed) for s in settings for seed in stage.replicate_seeds(spec)]
    groups = group_replicas(
        replicas, stage.pad_replicas, spec["recipe"] != "authors", facet_keys(spec)
    )
    _logger.info("sweep %s: %d replicas in %d groups", name, len(replicas), len(groups))
    rows, timings = [], []
    tasks: dict[tuple, Task] = {}
    for group in groups:
        start = time.perf_counter()
        group_tasks = []
        for s, seed in group:
            key = (s.task, s.N, s.S, s.temperature, seed)
            if key not in tasks:
                tasks[key] = make_task(s, seed, device)
            group_tasks.append(tasks[key])
        labels = {"x_axis": x_axis(spec), "facet": "|".join(facet_keys(spec))}
        rows += _train_group(group, group_tasks, stage, spec, device, labels)
        timings.append({"replicas": len(group), "seconds": time.perf_counter() - start})
        _logger.info("group of %d replicas took %.1f s", len(group), timings[-1]["seconds"])
    return SweepResult(pd.DataFrame(rows), timings, stage.sweep_train(spec))


def _train_group(
    group: Sequence[tuple[Setting, int]],
    tasks: Sequence[Task],
    stage: StageSettings,
    spec: Mapping[str, Any],
    device: torch.device,
    labels: Mapping[str, str],
) -> list[dict[str, Any]]:
    settings = [s for s, _ in group]
    seeds = [seed for _, seed in group]
    first = settings[0]
    sample = stage.sample_size(spec)
    train_sets = [
        t if sample is None else fixed_sample(t, sample, derive_seed(seed, "sample"))
        for t, seed in zip(tasks, seeds, strict=True)
    ]
    data = ReplicaData(
        inputs=(torch.stack([t.inputs for t in train_sets]),),
        targets=torch.stack([t.targets for t in train_sets]),
        sizes=torch.full((len(group),), train_sets[0].targets.shape[0], device=device),
    )
    model = ReplicaTransformer(settings, seeds).to(device)
    objective = "classification" if first.task == "association" else "distribution"
    cfg = stage.train_config(spec, first.T, first.task, first.model)
    result = train_replicas(model, data, objective, cfg, seeds, step=AoTStep(cfg, device))
    table_right = _table_correct(model, tasks)
    rows = []
    for r, (s, seed) in enumerate(group):
        entropy = tasks[r].entropy
        kl = float(result.kl[r])
        accuracy_table = float(table_right[r]) / s.T
        authors = spec["recipe"] == "authors"
        rows.append(
            {
                **s.as_row(),
                "seed": seed,
                **labels,
                "recipe": spec["recipe"],
                "metric": "last_batches" if authors else "all_inputs",
                "accuracy": float(result.batch_accuracy[r]) if authors else accuracy_table,
                "accuracy_table": accuracy_table,
                "accuracy_batches": float(result.batch_accuracy[r]),
                "memorized": int(table_right[r]),
                "kl": kl,
                "entropy": entropy,
                "cross_entropy": kl + entropy if objective == "distribution" else float("nan"),
                "loss": float(result.loss[r]),
                "fit_step": int(result.fit_step[r]),
                "steps_run": int(result.steps_run[r]),
                "chance": float(bounds.chance(s.N)),
                "bound_ours": float(bounds.our_lower_bound(s.N, s.T, s.H, s.d_h, s.d)),
                "bound_previous": float(bounds.previous_lower_bound(s.N, s.T, s.H, s.d_h)),
            }
        )
    return rows


@torch.no_grad()
def _table_correct(model: ReplicaTransformer, tasks: Sequence[Task]):
    """(R,) inputs among all N^S whose top logit is the target's (the trained state)."""
    inputs = torch.stack([t.inputs for t in tasks])
    targets = torch.stack([t.targets for t in tasks])
    logits = model(inputs)
    wanted = targets if targets.dim() == 2 else targets.argmax(-1)
    return (logits.argmax(-1) == wanted).sum(1).cpu().numpy()
