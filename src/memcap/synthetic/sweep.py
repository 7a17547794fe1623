"""Paper A's synthetic sweeps: many replicas of the MHA model trained at once, then certified.

A sweep varies one parameter (H, n or d_h) over its values, for each context kind, task,
seed and dataset size T of its grid; every combination is one *replica*. Replicas are split
into batched models by ``group_by`` (task always; optionally model shape and/or T) and each
batch trains through the shared loop :func:`memcap.training.loop.train_replicas`, with the
fast step of :mod:`memcap.synthetic.engine` unless the config says ``engine: reference``.
Grouping by T avoids padding every replica to the largest T in full-batch training; grouping
by shape avoids the masked work of padded heads and context positions; ``max_padding``
splits groups further by a cost model (:mod:`memcap.synthetic.buckets`).

For every replica the result row holds its training accuracy and memorized count (examples
whose top logit is the label; regression: error below ``regression_tol``), the certified
capacity of the same examples with random attention weights and with the trained attention
weights (:mod:`memcap.capacity.certified`), and the per-head softmax saturation.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace

import pandas as pd
import torch

from memcap.capacity.certified import (
    certified_capacity_curve,
    certified_capacity_from_attention,
    saturation,
)
from memcap.provenance import array_checksum
from memcap.synthetic.batched import batched_model, data_key, member_datasets
from memcap.synthetic.engine import FastStep
from memcap.synthetic.ladder import (
    capacity_replicas,
    first_training,
    median_probes,
    passes,
    series_of,
    trained_states,
    warm_start,
)
from memcap.synthetic.model import ReplicaMHA
from memcap.synthetic.settings import (
    SWEPT,
    Replica,
    Setting,
    StageSettings,
    SweepSpec,
    grid_replicas,
    replica_groups,
)
from memcap.synthetic.tasks import SyntheticSet
from memcap.theory import theory_bound
from memcap.training.active import select_parameters
from memcap.training.data import ReplicaData
from memcap.training.engine import choose_step
from memcap.training.loop import train_replicas
from memcap.training.plateau import late_loss_drop
from memcap.training.seeds import derive_seed

_logger = logging.getLogger(__name__)


@dataclass
class SweepResult:
    """One row per replica, and one saturation row per replica and head."""

    table: pd.DataFrame
    saturation: pd.DataFrame
    data_checksum: str


def run_sweep(spec: SweepSpec, stage: StageSettings, device: torch.device) -> SweepResult:
    """Train and certify every replica of one sweep, pass by pass (:mod:`~memcap.synthetic.ladder`).

    Args:
        spec: the sweep.
        stage: stage-wide settings, the global seed among them.
        device: where to train.
    """
    datasets = member_datasets(spec, stage, grid_replicas(spec, stage))
    _logger.info(
        "sweep %s (recipe %s): T grid %s, ladder %s, group_by=%s, device %s",
        spec.name,
        spec.recipe,
        list(spec.T),
        stage.ladder,
        list(stage.group_by),
        device,
    )
    kept: dict[Replica, Trained] = {}  # every replica's best training so far
    memorized: dict[tuple, int] = {}
    for members in passes(spec, stage, memorized):
        trainings = members
        for restart in range(1 + stage.ladder.restarts):
            # a first training starts from its series' latest kept state; a restart afresh
            warm = _latest_states(kept) if stage.ladder.warm_start and not restart else {}
            _train_pass(spec, stage, trainings, datasets, device, kept, warm)
            for replica in members:
                memorized[series_of(replica), replica.T] = kept[replica].memorized
            trainings = [
                replace(r, restart=restart + 1) for r in members if _fell(r, memorized, stage)
            ]
            if not trainings:
                break
    checks = _check_convergence(spec, stage, datasets, device, kept, memorized)
    rows = [
        kept[r].row | {"restarts": kept[r].restart} | checks.get(r.setting, NOT_CHECKED)
        for r in kept
    ]
    saturation_rows = [row for r in kept for row in kept[r].saturation]
    checksum = array_checksum(
        t.numpy()
        for key in sorted(datasets)
        for t in (datasets[key].queries, datasets[key].contexts, datasets[key].targets)
    )
    return SweepResult(pd.DataFrame(rows), pd.DataFrame(saturation_rows), checksum)


NOT_CHECKED = {"convergence_gain": float("nan"), "optimiser_limited": False}


def _train_pass(
    spec: SweepSpec,
    stage: StageSettings,
    trainings: list[Replica],
    datasets: dict[tuple, SyntheticSet],
    device: torch.device,
    kept: dict[Replica, Trained],
    warm: dict[tuple, dict[str, torch.Tensor]],
) -> list[tuple[Replica, Trained]]:
    """Train ``trainings`` in their batched models; keep each replica's best training in
    ``kept`` (keyed by the replica's first training); every training's result."""
    results = []
    for key, group in replica_groups(spec, stage, trainings).items():
        start = time.perf_counter()
        for replica, trained in _train_group(spec, stage, group, datasets, device, warm):
            first = first_training(replica)
            if first not in kept or trained.memorized > kept[first].memorized:
                kept[first] = trained
            results.append((replica, trained))
        _logger.info(
            "group %s, restart %d, budget %d: %d replicas in %.1f s",
            key, group[0].restart, group[0].budget, len(group), time.perf_counter() - start,
        )  # fmt: skip
    return results


def _check_convergence(
    spec: SweepSpec,
    stage: StageSettings,
    datasets: dict[tuple, SyntheticSet],
    device: torch.device,
    kept: dict[Replica, Trained],
    memorized: dict[tuple, int],
) -> dict[Setting, dict]:
    """The convergence check of every setting (:class:`~memcap.synthetic.settings.Convergence`):
    its median seed trained again with the longer budget from its capacity T up the ladder
    (:func:`_walk_longer`); the settings whose capacity gains more than the check allows train
    every other seed the same way. Per setting: the check's relative gain and whether it is
    limited."""
    check = stage.convergence
    if not check.enabled:
        return {}
    counts = {r: (t.memorized, t.restart) for r, t in kept.items()}
    best = capacity_replicas(counts)
    probes = median_probes(best, counts)
    before = {s: counts[first_training(r)][0] for s, r in probes.items()}
    most = _walk_longer(spec, stage, list(probes.values()), datasets, device, kept, memorized)
    after = {s: most[series_of(r)] for s, r in probes.items()}
    limited = {s for s in probes if check.limited(before[s], after[s])}
    _logger.info(
        "convergence check (x%d budget): %d of %d settings optimiser-limited",
        check.factor, len(limited), len(probes),
    )  # fmt: skip
    others = [r for r in best.values() if r.setting in limited and r.seed != probes[r.setting].seed]
    if others:
        _logger.info("%d seeds of optimiser-limited settings train again", len(others))
        _walk_longer(spec, stage, others, datasets, device, kept, memorized)
    return {
        s: {
            "convergence_gain": round((after[s] - before[s]) / max(before[s], 1), 4),
            "optimiser_limited": s in limited,
        }
        for s in probes
    }


def _walk_longer(
    spec: SweepSpec,
    stage: StageSettings,
    starts: list[Replica],
    datasets: dict[tuple, SyntheticSet],
    device: torch.device,
    kept: dict[Replica, Trained],
    memorized: dict[tuple, int],
) -> dict[tuple, int]:
    """Train every replica of ``starts`` again with the longer budget, from the same
    initialisation, at its T and up the ladder while its series grows (a replica that fitted
    every example of its T is tested at the next); per series, the most any of these
    trainings memorized. Each replica keeps its better training."""
    most: dict[tuple, int] = {}
    walk = [_longer(spec, stage, r) for r in starts]
    while walk:
        for replica, trained in _train_pass(spec, stage, walk, datasets, device, kept, {}):
            series = series_of(replica)
            most[series] = max(most.get(series, 0), trained.memorized)
            memorized[series, replica.T] = kept[first_training(replica)].memorized
        walk = [
            _longer(spec, stage, replace(r, T=stage.ladder.next_T(r.T)))
            for r in walk
            if stage.ladder.grows(memorized[series_of(r), r.T], r.T)
        ]
    return most


def _longer(spec: SweepSpec, stage: StageSettings, replica: Replica) -> Replica:
    """``replica`` with the convergence check's budget: ``factor`` times the steps its recipe
    gives at its T (extra budgets included), as one budget, whatever its own training ran."""
    cfg = stage.train_config(spec, replica.T)
    given = cfg.steps * (1 + cfg.extra_budgets)
    return replace(replica, budget=stage.convergence.factor * given)


@dataclass
class Trained:
    """One training of a replica: its result row, saturation rows and trained parameters."""

    row: dict
    saturation: list[dict]
    state: dict[str, torch.Tensor] | None  # kept for warm starts only
    restart: int

    @property
    def memorized(self) -> int:
        return self.row["memorized"]


def _latest_states(kept: dict[Replica, Trained]) -> dict[tuple, dict[str, torch.Tensor]]:
    """Every series' state at its largest T trained so far (``kept`` is in increasing T)."""
    return {series_of(r): trained.state for r, trained in kept.items()}


def _fell(replica: Replica, memorized: dict[tuple, int], stage: StageSettings) -> bool:
    """Whether ``replica``'s count fell along T (:meth:`Ladder.fell`)."""
    series = series_of(replica)
    before = [m for (s, t), m in memorized.items() if s == series and t < replica.T]
    return stage.ladder.fell(memorized[series, replica.T], before)


def _train_group(
    spec: SweepSpec,
    stage: StageSettings,
    members: list[Replica],
    datasets: dict[tuple, SyntheticSet],
    device: torch.device,
    warm: dict[tuple, dict[str, torch.Tensor]],
) -> list[tuple[Replica, Trained]]:
    """Train one batched model of ``members``, each starting from its series' state in
    ``warm`` where it has one (warm starts); every training's result."""
    task = members[0].setting.task
    cfg = stage.train_config(spec, max(r.T for r in members), members[0].budget)
    model, data, batch_seeds = batched_model(spec, stage, members, datasets, device)
    started = warm_start(model, members, warm)
    step = choose_step(cfg, model, task, device, fast=FastStep)
    result = train_replicas(model, data, task, cfg, batch_seeds, ReplicaMHA.select_replicas, step)
    still_falling = late_loss_drop(result.loss_curve, result.evaluations)
    trained = []
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
            "d_v": stage.value_dim,
            "classes": stage.classes if task == "classification" else 0,
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
            "bound": theory_bound(s.H, s.n),
            "saturation": float(per_head.mean()),
            "loss": float(result.loss[r]),
            "fit_step": int(result.fit_step[r]),
            "steps_run": int(result.steps_run[r]),
            "steps": cfg.steps,
            "recipe": spec.recipe,
            "late_loss_drop": float(still_falling[r]),
            "warm_start": started[r],
            "grow_at": stage.ladder.grow_at,
            "grown": t > max(spec.T),
        }
        per_head_rows = [{**ids, "head": h, "saturation": float(v)} for h, v in enumerate(per_head)]
        row["budget"] = replica.budget
        trained.append((replica, Trained(row, per_head_rows, states_after[r], replica.restart)))
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
            select_parameters(exact, index)
            exact.select_replicas(index)
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
