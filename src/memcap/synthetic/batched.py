"""A group of paper A's replicas as one batched model: its untrained :class:`ReplicaMHA`,
the replicas' datasets stacked and padded, their model and batch seeds, and warm starts.

Datasets depend on a replica's seed, n, context and task only, so the H and d_h sweeps'
replicas of one seed read the same (paired) data. Under mini-batches a batched model stores
each distinct dataset once and each step gathers every replica's rows from it
(``ReplicaData.source``: at paper A's sizes a copy per replica would not fit a GPU); a full
batch holds every replica's own copy, which the model reads every step.

Warm starts carry every replica's trained parameters out of one batched model
(:func:`trained_states`) and into the next (:func:`warm_start`). A series keeps its shape from
rung to rung, and padded entries are zero in both batched models, so copying the slice the
two paddings share copies every real entry.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from memcap.synthetic.model import MHAShape, ReplicaMHA
from memcap.synthetic.settings import Replica, StageSettings, SweepSpec, replica_groups
from memcap.synthetic.tasks import SyntheticSet, make_dataset
from memcap.training.config import derive_seed
from memcap.training.data import ReplicaData


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
) -> tuple[ReplicaMHA, ReplicaData, list[int]]:
    """The untrained batched model of ``members``, their stacked data and batch seeds."""
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
    batches = stage.group_config(spec, members).batch_size is not None
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
