"""Train every setting × seed of one AoT sweep through the shared training loop.

Replicas (setting × seed) are grouped into one batched model per (task, N, S, depth, model,
variant, MLP width); within a group, shapes (H, d_h, d) differ and are zero-padded and masked
(see :mod:`memcap.aot.model`); a sweep's facets train apart, and with ``pad_replicas = False``
every distinct shape trains alone (:func:`memcap.aot.settings.group_replicas`). Every group
trains through :func:`memcap.training.loop.train_replicas` with
:class:`memcap.aot.model.AoTStep`: the model's forward and autograd's backward.

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
from memcap.aot.model import AoTStep, ReplicaTransformer
from memcap.aot.settings import (
    Setting,
    StageSettings,
    expand_sweep,
    facet_keys,
    group_replicas,
    x_axis,
)
from memcap.aot.tasks import Task, association_task, distribution_task, fixed_sample
from memcap.training.config import derive_seed
from memcap.training.data import ReplicaData
from memcap.training.loop import train_replicas

_logger = logging.getLogger(__name__)


@dataclass
class SweepResult:
    """One row per replica, the wall time of every batched model and the sweep's training."""

    table: pd.DataFrame
    groups: list[dict[str, Any]]  # replicas and seconds of each batched model
    train: dict[str, Any]  # the sweep's training settings (stage's with the sweep's own)


def make_task(s: Setting, seed: int, device: torch.device) -> Task:
    if s.task == "association":
        return association_task(s.N, s.S, seed, device)
    return distribution_task(s.N, s.S, seed, s.temperature, device)


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
