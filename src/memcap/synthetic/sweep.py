"""Paper A's synthetic sweeps: every series through the protocol, its replicas trained in
batched models, then certified.

A sweep varies one parameter (H, n or d_h) over its values, for each context kind, task and
seed (a *series*); :mod:`memcap.synthetic.series` decides which dataset sizes T and budgets
each series trains at (the *replicas*), and this module trains them: a pass's replicas are
split into batched models (:func:`memcap.synthetic.settings.replica_groups`) and each trains
through the shared loop :func:`memcap.training.loop.train_replicas`: the model's forward
(:mod:`memcap.synthetic.model`) and autograd.

Every replica's result row holds its training accuracy and memorized count (examples whose
top logit is the label; regression: error below ``regression_tol``), the certified capacity of
the same examples with random attention weights and with the trained attention weights
(:mod:`memcap.capacity.certified`), and the per-head softmax saturation. The table keeps one
row per series and T: its best training.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from functools import partial

import pandas as pd
import torch

from memcap.capacity.certified import (
    certified_capacity_curve,
    certified_capacity_from_attention,
    saturation,
)
from memcap.provenance import array_checksum
from memcap.synthetic.batched import (
    Draw,
    batched_model,
    data_key,
    member_datasets,
    trained_states,
    warm_start,
)
from memcap.synthetic.chance import chance_count, fitted_chance
from memcap.synthetic.model import ReplicaMHA
from memcap.synthetic.series import Series, Trained, bracket, bracket_grouping, check, climb
from memcap.synthetic.settings import (
    SWEPT,
    Replica,
    StageSettings,
    SweepSpec,
    grid_replicas,
    replica_groups,
)
from memcap.synthetic.tasks import SyntheticSet
from memcap.theory import bound_kind, construction_count
from memcap.training.config import derive_seed
from memcap.training.data import ReplicaData
from memcap.training.loop import train_replicas
from memcap.training.plateau import late_loss_drop
from memcap.training.step import select_model

_logger = logging.getLogger(__name__)
NAN = float("nan")


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
    model, data, batch_seeds = batched_model(spec, stage, members, datasets, device)
    started = warm_start(model, [warm[r] for r in members])
    result = train_replicas(model, data, task, cfg, batch_seeds)
    still_falling = late_loss_drop(result.loss_curve, result.evaluations)
    classes = stage.classes if task == "classification" else 0
    chance = {T: chance_count(T, classes, cfg.regression_tol) for T in {r.T for r in members}}
    trained = {}
    states_after = trained_states(model) if stage.ladder.warm_start else [None] * len(members)
    for r, replica, weights, embedded in _trained_attention(model, data, members):
        s, t = replica.setting, replica.T
        own = datasets[data_key(replica)].head(t)
        per_head = saturation(weights, stage.saturation_threshold).cpu().numpy()
        ids = {**asdict(s), "T": t, "seed": replica.seed}  # sweep, H, n, d_h, context, task
        row = {
            **ids,
            "value": s.value,
            "swept": SWEPT[spec.name],
            "d": stage.d,
            "d_v": stage.d_v,
            "classes": classes,
            "accuracy": float(result.accuracy[r]),
            "memorized": int(result.memorized[r]),
            "certified": certified_capacity_curve(
                own.queries,
                own.contexts,
                [s.H],
                s.d_h,
                seed=derive_seed(stage.base_seed, "certify", spec.name, replica.seed),
                device=device,
            )[0].rank,
            "certified_trained": certified_capacity_from_attention(weights, embedded),
            "bound": construction_count(s.H, s.n, s.d_h),
            "bound_kind": bound_kind(s.n, s.d_h),
            "chance": chance[t].expected,
            "chance_high": chance[t].high,
            "fitted_chance_high": fitted_chance(classes, cfg.regression_tol).high,
            "saturation": float(per_head.mean()),
            "loss": float(result.loss[r]),
            "fit_step": int(result.fit_step[r]),
            "steps_run": int(result.steps_run[r]),
            "steps": cfg.steps,
            "recipe": spec.recipe,
            "late_loss_drop": float(still_falling[r]),
            "warm_start": started[r],
            "grow_at": stage.ladder.grow_at,
            "past_maximum": stage.ladder.past_maximum,
            "bracket": stage.ladder.bracket or NAN,
            "grown": t > max(spec.T),
            "budget": replica.budget,
            "convergence_margin": stage.convergence.gain if stage.convergence.enabled else NAN,
        }
        per_head_rows = [{**ids, "head": h, "saturation": float(v)} for h, v in enumerate(per_head)]
        trained[replica] = Trained(row, per_head_rows, states_after[r], replica.restart)
    return trained


ANALYSIS_BYTES = 2**31  # float64 attention and embedded contexts of one block of replicas


@torch.no_grad()
def _trained_attention(
    model: ReplicaMHA, data: ReplicaData, members: list[Replica], chunk: int = 1024
) -> Iterator[tuple[int, Replica, torch.Tensor, torch.Tensor]]:
    """Each replica's position, its trained query attention (T, H, n) and its embedded
    contexts (T, n, d), in float64, for blocks of replicas within :data:`ANALYSIS_BYTES`.

    Recomputed in float64: float32 weights sum to one only to ~1e-7, which the rank of Z
    would count as extra directions.
    """
    t_max, n_max = data.targets.shape[1], model.max_n
    per_replica = 8 * t_max * n_max * (model.max_H + model.d)
    block = max(1, ANALYSIS_BYTES // per_replica)
    for first in range(0, len(members), block):
        index = torch.arange(first, min(first + block, len(members)), device=data.sizes.device)
        exact = copy.deepcopy(model).double()
        if len(index) < len(members):
            select_model(exact, index)
        queries, contexts = (x.double() for x in data.select(index).replica_inputs())
        one = contexts.shape[1] == 1 < t_max  # one context for every example
        attention, embedded = [], []
        for start in range(0, t_max, chunk):
            q = queries[:, start : start + chunk]
            c = contexts if one else contexts[:, start : start + chunk]
            attention.append(exact.attention(q, c))
            if not one or not embedded:
                embedded.append(exact.embed(q, c)[1])
        attention, embedded = torch.cat(attention, 1), torch.cat(embedded, 1)
        for k, r in enumerate(index.tolist()):
            s, t = members[r].setting, members[r].T
            rows = embedded[k, :, : s.n].expand(t, -1, -1) if one else embedded[k, :t, : s.n]
            yield r, members[r], attention[k, :t, : s.H, : s.n], rows
