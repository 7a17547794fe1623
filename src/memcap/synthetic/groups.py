"""Which replicas of a sweep share a batched model, and how much memory the largest needs.

A *batched model* trains many replicas at once (:mod:`memcap.synthetic.batched`). Replicas of
one task always share; ``engine.synthetic.group_by`` splits further by model shape, T and/or
context kind, a replica of the convergence check's longer budget never shares with one of
another step count, and ``max_padding`` splits a group into buckets by the cost model of
:mod:`memcap.synthetic.buckets`.

No torch import here: the Snakefile sizes the sweep jobs with :func:`sweep_memory_mb`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memcap.synthetic.buckets import StepCost, StepShape, bucket_replicas
from memcap.synthetic.settings import GROUP_KEYS, Replica, StageSettings, SweepSpec, sweep_spec


def group_key(replica: Replica, keys: tuple[str, ...]) -> tuple:
    """The batched model ``replica`` trains in, under ``group_by`` ``keys``."""
    s = replica.setting
    key: tuple = (s.task,)
    if "shape" in keys:
        key += (s.H, s.n, s.d_h)
    if "T" in keys:
        key += (replica.T,)
    if "context" in keys:
        key += (s.context,)
    if replica.budget:  # a batched model runs one step count
        key += (f"{replica.budget} steps",)
    return key


def grid_replicas(spec: SweepSpec, stage: StageSettings) -> list[Replica]:
    """Every replica of the sweep's listed grid: settings × seeds × T."""
    return [
        Replica(setting, seed, T)
        for setting in spec.settings()
        for seed in stage.replicate_seeds(spec)
        for T in spec.T
    ]


def replica_groups(
    spec: SweepSpec, stage: StageSettings, members: list[Replica] | None = None
) -> dict[tuple, list[Replica]]:
    """``members`` (default: the listed grid, :func:`grid_replicas`) split into batched models.

    ``stage.group_by`` splits first; with ``stage.max_padding`` set, each group is split
    further into buckets of one step count whose padding stays within the bound
    (:mod:`memcap.synthetic.buckets`).
    """
    unknown = set(stage.group_by) - set(GROUP_KEYS)
    if unknown:
        raise ValueError(f"unknown group_by keys {sorted(unknown)}; use {list(GROUP_KEYS)}")
    groups: dict[tuple, list[Replica]] = {}
    for replica in grid_replicas(spec, stage) if members is None else members:
        groups.setdefault(group_key(replica, stage.group_by), []).append(replica)
    if stage.max_padding is None:
        return groups
    return {
        key + bucket: members
        for key, group in groups.items()
        for bucket, members in _buckets(spec, stage, group).items()
    }


def _buckets(
    spec: SweepSpec, stage: StageSettings, group: list[Replica]
) -> dict[tuple, list[Replica]]:
    """``group`` split by step count, then into buckets of padding <= ``stage.max_padding``."""
    by_steps: dict[int, list[Replica]] = {}
    for replica in group:
        by_steps.setdefault(stage.train_config(spec, replica.T).steps, []).append(replica)
    buckets: dict[tuple, list[Replica]] = {}
    for steps, members in by_steps.items():
        cfg = stage.group_config(spec, members)
        cost = step_cost(stage, members[0].setting.task, cfg.eval_every)
        shapes = [step_shape(r, cfg.batch_size) for r in members]
        for k, chosen in enumerate(bucket_replicas(shapes, cost, stage.max_padding)):
            buckets[(f"{steps} steps", f"bucket {k}")] = [members[i] for i in chosen]
    return buckets


def step_shape(replica: Replica, batch_size: int | None) -> StepShape:
    """The cost model's shape of ``replica``'s training step."""
    s = replica.setting
    return StepShape(s.H, s.n, s.d_h, batch_size or replica.T, replica.T)


def step_cost(stage: StageSettings, task: str, eval_every: int) -> StepCost:
    """The cost model of the stage's replicas of ``task``."""
    outputs = stage.classes if task == "classification" else 1
    return StepCost(stage.d, stage.d_v, outputs, eval_every)


def sweep_memory_mb(
    section: Mapping[str, Any], engine: Mapping[str, Any], name: str, base_mb: int = 1500
) -> int:
    """Host memory a sweep job needs: the largest batched model's data and activations."""
    return spec_memory_mb(section, engine, sweep_spec(section, name), base_mb)


def spec_memory_mb(
    section: Mapping[str, Any], engine: Mapping[str, Any], spec: SweepSpec, base_mb: int = 1500
) -> int:
    """Host memory of a job that trains ``spec`` (a sweep, or one of its settings).

    A batched model holds every replica of one group padded to the group's largest T and n;
    a training step holds activations for the batch (or the full data), about 16 floats per
    token and model dimension with gradients and evaluation copies.
    """
    stage = StageSettings.from_config(section, 0, engine)
    largest = 0
    for members in replica_groups(spec, stage).values():
        t_max = max(r.T for r in members)
        token_bytes = (max(r.setting.n for r in members) + 1) * section["d"] * 4
        batch = stage.group_config(spec, members).batch_size or t_max
        largest = max(largest, len(members) * (t_max + 16 * batch) * token_bytes)
    return base_mb + 2 * largest // 2**20
