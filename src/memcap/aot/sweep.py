"""Train every setting × seed of one AoT sweep through the shared training loop.

Replicas (setting × seed) are grouped into one batched model per (task, N, S, depth, model,
MLP width); within a group, shapes (H, d_h, d) differ and are zero-padded and masked (see
:mod:`memcap.aot.model`). With ``pad_replicas = False`` every distinct shape trains alone.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd
import torch

from memcap.aot import bounds
from memcap.aot.model import ReplicaTransformer
from memcap.aot.settings import GRID_KEYS, Setting, expand_sweep
from memcap.aot.tasks import Task, association_task, distribution_task
from memcap.train import ReplicaData, TrainConfig, train_replicas

_logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AotTrainSettings:
    """Optimisation and replication settings of the aot stage (``config["aot"]``)."""

    seeds: int = 2  # seeds per setting (different table and initialisation), averaged
    base_seed: int = 0  # global seed; replica k of a setting uses base_seed * 1000 + k
    lr: float = 0.1  # peak Adam learning rate
    schedule: Literal["cosine", "linear", "constant"] = "linear"  # decay after warm-up
    warmup_frac: float = 0.0  # fraction of steps with linear warm-up
    epochs: int = 1000  # passes over the T0 inputs
    batch_size: int | None = None  # examples per step; None = all T0 inputs (full batch)
    eval_every: int = 100  # steps between full evaluations (best state, early stop)
    early_stop: bool = True  # association: stop once every replica reaches 100% accuracy
    pad_replicas: bool = True  # batch different shapes together (zero-padded, masked)

    @classmethod
    def from_config(cls, aot: Mapping[str, Any], seed: int) -> AotTrainSettings:
        """From the validated ``config["aot"]`` section and the global seed."""
        keys = ("seeds", "lr", "schedule", "warmup_frac", "epochs", "batch_size", "eval_every")
        return cls(
            base_seed=int(seed),
            early_stop=aot["early_stop"],
            pad_replicas=aot["pad_replicas"],
            **{k: aot[k] for k in keys},
        )

    def for_sweep(self, spec: Mapping[str, Any]) -> AotTrainSettings:
        """These settings with the sweep's own ``epochs`` / ``lr`` where it sets them."""
        overrides = {k: spec[k] for k in ("epochs", "lr") if spec.get(k) is not None}
        return dataclasses.replace(self, **overrides)

    def replica_seeds(self) -> list[int]:
        return [self.base_seed * 1000 + k for k in range(self.seeds)]

    def train_config(self, T0: int, task: str) -> TrainConfig:
        per_epoch = 1 if self.batch_size is None else math.ceil(T0 / self.batch_size)
        steps = self.epochs * per_epoch
        return TrainConfig(
            steps=steps,
            lr=self.lr,
            warmup_frac=self.warmup_frac,
            schedule=self.schedule,
            batch_size=self.batch_size,
            eval_every=min(self.eval_every, steps),
            # the distribution task keeps lowering the KL after the argmax is right
            early_stop=self.early_stop and task == "association",
        )


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
    replicas: Sequence[tuple[Setting, int]], pad: bool
) -> list[list[tuple[Setting, int]]]:
    """Replicas that can share one batched model, in first-seen order."""
    groups: dict[tuple, list[tuple[Setting, int]]] = {}
    for setting, seed in replicas:
        # MLP widths stay apart: padding a narrow MLP to a wide one costs more than a run
        key = (setting.task, setting.N, setting.S, setting.depth, setting.model, setting.width)
        if not pad:
            key = key + setting.shape_key()
        groups.setdefault(key, []).append((setting, seed))
    return list(groups.values())


def run_sweep(
    name: str, spec: Mapping[str, Any], train: AotTrainSettings, device: torch.device
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Train every setting × seed of a sweep; one row per replica, plus run statistics."""
    settings = expand_sweep(name, spec)
    train = train.for_sweep(spec)
    replicas = [(s, seed) for s in settings for seed in train.replica_seeds()]
    groups = group_replicas(replicas, train.pad_replicas)
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
        rows += _train_group(group, group_tasks, train, device, labels)
        timings.append({"replicas": len(group), "seconds": time.perf_counter() - start})
        _logger.info("group of %d replicas took %.1f s", len(group), timings[-1]["seconds"])
    stats = {"groups": timings, "replicas": len(replicas), "training": dataclasses.asdict(train)}
    return pd.DataFrame(rows), stats


def _train_group(
    group: Sequence[tuple[Setting, int]],
    tasks: Sequence[Task],
    train: AotTrainSettings,
    device: torch.device,
    labels: Mapping[str, str],
) -> list[dict[str, Any]]:
    settings = [s for s, _ in group]
    seeds = [seed for _, seed in group]
    first = settings[0]
    data = ReplicaData(
        inputs=(torch.stack([t.inputs for t in tasks]),),
        targets=torch.stack([t.targets for t in tasks]),
        sizes=torch.full((len(group),), first.T0, device=device),
    )
    model = ReplicaTransformer(settings, seeds).to(device)
    objective = "classification" if first.task == "association" else "distribution"
    result = train_replicas(model, data, objective, train.train_config(first.T0, first.task), seeds)
    rows = []
    for r, (s, seed) in enumerate(group):
        entropy = tasks[r].entropy
        kl = float(result.kl[r])
        rows.append(
            {
                **s.as_row(),
                "seed": seed,
                **labels,
                "accuracy": float(result.accuracy[r]),
                "memorized": int(result.memorized[r]),
                "kl": kl,
                "entropy": entropy,
                "cross_entropy": kl + entropy if objective == "distribution" else float("nan"),
                "loss": float(result.loss[r]),
                "fit_step": int(result.fit_step[r]),
                "steps_run": result.steps_run,
                "chance": float(bounds.chance(s.N)),
                "bound_ours": float(bounds.our_lower_bound(s.N, s.T0, s.H, s.d_h, s.d)),
                "bound_previous": float(bounds.previous_lower_bound(s.N, s.T0, s.H, s.d)),
            }
        )
    return rows
