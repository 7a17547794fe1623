"""Paper A's synthetic sweeps: every series through the protocol, its replicas trained in
batched models.

A sweep varies one parameter (H, n or d_h) over its values, for each context kind, task and
seed (a *series*); :mod:`memcap.synthetic.series` decides which dataset sizes T and budgets
each series trains at (the *replicas*), and this module trains them: a pass's replicas are
split into batched models (:func:`memcap.synthetic.settings.replica_groups`), and each
batched model trains through the shared loop :func:`memcap.training.loop.train_replicas`: the
model's forward (:mod:`memcap.synthetic.model`) and autograd. What each trained replica
reports is :mod:`memcap.synthetic.results`'s; the table keeps one row per series and T: its
best training.

A batched model (:func:`batched_model`) is its untrained :class:`ReplicaMHA`, the replicas'
datasets stacked and padded, and their model and batch seeds. Datasets depend on a replica's
seed, n, context and task only, so the H and d_h sweeps' replicas of one seed read the same
(paired) data. Under mini-batches a batched model stores each distinct dataset once and each
step gathers every replica's rows from it (``ReplicaData.source``: at paper A's sizes a copy
per replica would not fit a GPU); a full batch holds every replica's own copy, which the model
reads every step.

Warm starts carry every replica's trained parameters out of one batched model
(:func:`trained_states`) and into the next (:func:`warm_start`). A series keeps its shape from
rung to rung, and padded entries are zero in both batched models, so copying the slice the two
paddings share copies every real entry.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import pandas as pd
import torch
from torch import Tensor, nn

from memcap.provenance import array_checksum
from memcap.synthetic.model import MHAShape, ReplicaMHA
from memcap.synthetic.results import trained_rows
from memcap.synthetic.series import Series, Trained, bracket, bracket_grouping, check, climb
from memcap.synthetic.settings import (
    Replica,
    StageSettings,
    SweepSpec,
    grid_replicas,
    replica_groups,
)
from memcap.synthetic.tasks import SyntheticSet, make_dataset
from memcap.training.config import derive_seed
from memcap.training.data import ReplicaData
from memcap.training.loop import train_replicas

_logger = logging.getLogger(__name__)


@dataclass
class SweepResult:
    """One row per series and T tried, and one saturation row per such row and head."""

    table: pd.DataFrame
    saturation: pd.DataFrame
    data_checksum: str


def run_sweep(
    spec: SweepSpec, stage: StageSettings, device: torch.device, draw: Draw | None = None
) -> SweepResult:
    """Train and certify every series of one sweep through the protocol of
    :mod:`~memcap.synthetic.series`.

    Args:
        spec: the sweep.
        stage: stage-wide settings, the global seed among them.
        device: where to train.
        draw: the sweep's data (None: paper A's synthetic data; the real-embedding stage
            passes its examples, :mod:`memcap.real_memorization.inputs`).
    """
    datasets = member_datasets(spec, stage, grid_replicas(spec, stage), draw)
    _logger.info(
        "sweep %s (recipe %s): T grid %s, %s, %s, group_by=%s, device %s",
        spec.name, spec.recipe, list(spec.T), stage.ladder, stage.convergence,
        list(stage.group_by), device,
    )  # fmt: skip
    everyone = [Series(s, seed) for s in spec.settings() for seed in stage.replicate_seeds(spec)]

    def train(replicas: list[Replica], states: list) -> dict[Replica, Trained]:
        return _train_pass(spec, stage, replicas, states, datasets, device)

    def train_any_T(replicas: list[Replica], states: list) -> dict[Replica, Trained]:
        return _train_pass(spec, bracket_grouping(stage), replicas, states, datasets, device)

    recipe_steps = partial(_recipe_steps, spec, stage)
    climb(everyone, spec.T, stage.ladder, train)
    check(everyone, stage.ladder, stage.convergence, recipe_steps, train)
    bracket(everyone, stage.ladder, stage.convergence, recipe_steps, train_any_T)
    rows = [row for s in everyone for row in s.rows()]
    saturation_rows = [row for s in everyone for T in s.T_tried for row in s.best(T).saturation]
    checksum = array_checksum(
        t.numpy()
        for key in sorted(datasets)
        for t in (datasets[key].queries, datasets[key].contexts, datasets[key].targets)
    )
    return SweepResult(pd.DataFrame(rows), pd.DataFrame(saturation_rows), checksum)


def _recipe_steps(spec: SweepSpec, stage: StageSettings, T: int) -> int:
    """The steps the recipe gives at ``T``, extra budgets included, as one budget."""
    cfg = stage.train_config(spec, T)
    return cfg.steps * (1 + cfg.extra_budgets)


def _train_pass(
    spec: SweepSpec,
    stage: StageSettings,
    replicas: list[Replica],
    states: list,
    datasets: dict[tuple, SyntheticSet],
    device: torch.device,
) -> dict[Replica, Trained]:
    """Train ``replicas`` in their batched models, each from its warm-start state in
    ``states`` (None: a fresh initialisation); every replica's training."""
    warm = dict(zip(replicas, states, strict=True))
    results = {}
    for key, group in replica_groups(spec, stage, replicas).items():
        start = time.perf_counter()
        results.update(_train_group(spec, stage, group, datasets, device, warm))
        _logger.info(
            "group %s, restart %d, budget %d: %d replicas in %.1f s",
            key, group[0].restart, group[0].budget, len(group), time.perf_counter() - start,
        )  # fmt: skip
    return results


def _train_group(
    spec: SweepSpec,
    stage: StageSettings,
    members: list[Replica],
    datasets: dict[tuple, SyntheticSet],
    device: torch.device,
    warm: dict[Replica, dict[str, torch.Tensor] | None],
) -> dict[Replica, Trained]:
    """Train one batched model of ``members``, each starting from its state in ``warm`` where
    it has one (warm starts); every member's training."""
    task = members[0].setting.task
    cfg = stage.group_config(spec, members)
    model, data, batch_seeds = batched_model(spec, stage, members, datasets, device, cfg.batch_size)
    started = warm_start(model, [warm[r] for r in members])
    result = train_replicas(model, data, task, cfg, batch_seeds)
    own_sets = [datasets[data_key(r)] for r in members]
    states_after = trained_states(model) if stage.ladder.warm_start else [None] * len(members)
    return trained_rows(
        spec, stage, members, model, data, result, cfg, own_sets, started, states_after, device
    )


def sweep_groups(
    spec: SweepSpec, stage: StageSettings
) -> tuple[dict[tuple, list[Replica]], dict[tuple, SyntheticSet]]:
    """The sweep's batched models (:func:`replica_groups`) and their data."""
    groups = replica_groups(spec, stage)
    return groups, member_datasets(spec, stage, [r for m in groups.values() for r in m])


Draw = Callable[[tuple, int], SyntheticSet]  # a data key and the examples to draw → the set


def member_datasets(
    spec: SweepSpec, stage: StageSettings, members: list[Replica], draw: Draw | None = None
) -> dict[tuple, SyntheticSet]:
    """The datasets that ``members`` train on (one per seed, n, context and task), drawn by
    ``draw`` (None: paper A's synthetic data, :func:`synthetic_draw`)."""
    draw = draw or synthetic_draw(spec, stage)
    size = stage.ladder.data_size(spec.T)
    return {key: draw(key, size) for key in {data_key(r) for r in members}}


def batched_model(
    spec: SweepSpec,
    stage: StageSettings,
    members: list[Replica],
    datasets: dict[tuple, SyntheticSet],
    device: torch.device,
    batch_size: int | None,
) -> tuple[ReplicaMHA, ReplicaData, list[int]]:
    """The untrained batched model of ``members``, their data stacked for mini-batches of
    ``batch_size`` (None: full batches) and their batch seeds."""
    task = members[0].setting.task
    shapes = [
        MHAShape(
            d=stage.d,
            n=r.setting.n,
            H=r.setting.H,
            d_h=r.setting.d_h,
            d_v=stage.d_v,
            classes=stage.classes if task == "classification" else None,
            xavier=spec.recipe == "authors",
            embedded=stage.embedded,
        )
        for r in members
    ]
    model_seeds = [_replica_seed(stage.base_seed, "model", spec, r) for r in members]
    batch_seeds = [_replica_seed(stage.base_seed, "batches", spec, r) for r in members]
    model = ReplicaMHA(shapes, model_seeds).to(device)
    batches = batch_size is not None
    return model, _stack(members, datasets, model.max_n, device, batches), batch_seeds


def data_key(replica: Replica) -> tuple:
    """Datasets depend on the seed, n, context and task only (paired across H and d_h)."""
    s = replica.setting
    return (replica.seed, s.n, s.context, s.task)


def synthetic_draw(spec: SweepSpec, stage: StageSettings) -> Draw:
    """Paper A's synthetic data (:func:`make_dataset`), one seed per data key."""

    def draw(key: tuple, size: int) -> SyntheticSet:
        seed, n, context, task = key
        data_seed = derive_seed(stage.base_seed, "data", spec.name, seed, n, context, task)
        return make_dataset(size, n, stage.d, context, task, stage.classes, data_seed)

    return draw


def _replica_seed(base_seed: int, purpose: str, spec: SweepSpec, replica: Replica) -> int:
    s = replica.setting
    parts = (spec.name, replica.seed, s.H, s.n, s.d_h, s.context, s.task, replica.T)
    restart = ("restart", replica.restart) if replica.restart else ()
    return derive_seed(base_seed, purpose, *parts, *restart)


def _stack(
    members: list[Replica],
    datasets: dict[tuple, SyntheticSet],
    n_max: int,
    device: torch.device,
    batches: bool,
) -> ReplicaData:
    """Pad every member's data to the group's largest T and n, on ``device``: with
    mini-``batches`` one copy per distinct dataset, read through ``source`` where members
    share one, and one context row per dataset where every member's context is shared (a
    batch reads it as it is); in full batches one copy per member."""
    t_max = max(r.T for r in members)
    every = [data_key(r) for r in members]
    keys = list(dict.fromkeys(every)) if batches else every
    one_context = batches and all(r.setting.context == "shared" for r in members)
    queries, contexts = [], []
    for key in keys:
        own = datasets[key].head(t_max)
        queries.append(own.queries)
        rows = own.contexts[:1] if one_context else own.contexts  # (1, n, d): one for all
        contexts.append(torch.nn.functional.pad(rows, (0, 0, 0, n_max - rows.shape[1])))
    targets = [datasets[data_key(r)].head(t_max).targets for r in members]
    shared = len(keys) < len(members)
    source = torch.tensor([keys.index(key) for key in every]) if shared else None
    return ReplicaData(
        (torch.stack(queries).to(device), torch.stack(contexts).to(device)),
        torch.stack(targets).to(device),
        torch.tensor([r.T for r in members]).to(device),
        None if source is None else source.to(device),
    )


def trained_states(model: nn.Module) -> list[dict[str, Tensor]]:
    """Every replica's parameters (its slice of the batched model), in replica order."""
    parameters = list(model.named_parameters())
    return [
        {name: p[k].detach().clone() for name, p in parameters}
        for k in range(parameters[0][1].shape[0])
    ]


@torch.no_grad()
def warm_start(model: nn.Module, states: list[dict[str, Tensor] | None]) -> list[bool]:
    """Load each replica's state (None: keep its fresh initialisation) into its slice of
    ``model``; which replicas had one."""
    for k, state in enumerate(states):
        if state is None:
            continue
        for name, p in model.named_parameters():
            source = state[name]
            common = tuple(
                slice(0, min(a, b)) for a, b in zip(p.shape[1:], source.shape, strict=True)
            )
            p[k].zero_()
            p[k][common] = source[common]
    return [state is not None for state in states]
