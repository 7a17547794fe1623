"""What a trained replica of paper A reports: its result row, certified, and per-head rows.

Every replica's row holds its training accuracy and memorized count (examples whose top logit
is the label; regression: error below ``regression_tol``), the certified capacity of the same
examples with random attention weights and with the trained attention weights
(:mod:`memcap.capacity.certified`), chance, the construction's bound, and the per-head softmax
saturation.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import asdict

import torch

from memcap.capacity.certified import (
    certified_capacity_curve,
    certified_capacity_from_attention,
    saturation,
)
from memcap.synthetic.chance import chance_count, fitted_chance
from memcap.synthetic.model import ReplicaMHA
from memcap.synthetic.series import Trained
from memcap.synthetic.settings import SWEPT, Replica, StageSettings, SweepSpec
from memcap.synthetic.tasks import SyntheticSet
from memcap.theory import bound_kind, construction_count
from memcap.training.config import TrainConfig, derive_seed
from memcap.training.data import ReplicaData
from memcap.training.loop import TrainResult
from memcap.training.plateau import late_loss_drop
from memcap.training.step import select_model

NAN = float("nan")


def trained_rows(
    spec: SweepSpec,
    stage: StageSettings,
    members: list[Replica],
    model: ReplicaMHA,
    data: ReplicaData,
    result: TrainResult,
    cfg: TrainConfig,
    own_sets: list[SyntheticSet],
    started: list[bool],
    states_after: list[dict[str, torch.Tensor] | None],
    device: torch.device,
) -> dict[Replica, Trained]:
    """Every member's training in one batched ``model`` trained under ``cfg``: its row,
    per-head rows and trained state (``states_after``, kept for warm starts).

    ``own_sets``: each member's dataset (its first T examples are its training set);
    ``started``: which members began from a warm start.
    """
    task = members[0].setting.task
    still_falling = late_loss_drop(result.loss_curve, result.evaluations)
    classes = stage.classes if task == "classification" else 0
    chance = {T: chance_count(T, classes, cfg.regression_tol) for T in {r.T for r in members}}
    trained = {}
    for r, replica, weights, embedded in _trained_attention(model, data, members):
        s, t = replica.setting, replica.T
        own = own_sets[r].head(t)
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
