"""The cost model: each job's expected wall time from its work and measured rates.

A job's *work* is counted from the config in units (:data:`UNITS`); its expected seconds are
a fixed start plus the work times the *rates*, seconds per unit measured on the device kind
it runs on (:class:`Rates`). Its SLURM request is :func:`runtime_minutes`: the start plus
:data:`MARGIN` times the work's seconds, in whole minutes, at least :data:`FLOOR_MINUTES`.
benchmarks/cluster_costs.py derives the rates from the committed measurements into
:data:`COSTS_FILE` (each rate the largest over its measurements, with their ratios).

Work per job:

- **Paper A** (:func:`synthetic_work`): the batched models of passes that cost at least what
  the protocol of :mod:`memcap.synthetic.series` may train: their steps, and steps × padded
  FLOPs per step (:mod:`memcap.synthetic.buckets`) by context kind; every trained replica adds
  the FLOPs of two float64 SVDs of its Z (T × H·d).
- **Paper B** (:func:`aot_work`): every batched model's steps, and steps × replicas × rows.
- **Checks** (:func:`checks_work`): :data:`SEARCHES` Kruskal searches per layer of its
  orderings, each weighted (d / :data:`ORDERING_D`)³ (a Cholesky's count), over the workers.
- **Extraction** (:func:`extract_work`): tokens × layers; **certified capacity**
  (:func:`certify_work`): the SVD FLOPs of each detail layer's Z at every H.

No torch import: the Snakefile sizes every job with this module.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from memcap.aot.settings import StageSettings as AotStage
from memcap.aot.settings import expand_sweep, facet_keys, group_replicas
from memcap.capacity.settings import MAX_D, TEXT_FULL_N, VIT_FULL_N
from memcap.synthetic.series import BRACKET_PADDING, Pass, bracket_passes, passes
from memcap.synthetic.settings import (
    Replica,
    StageSettings,
    SweepSpec,
    replica_groups,
    step_cost,
    step_shape,
)

COSTS_FILE = "benchmarks/cluster_costs.json"
MARGIN = 2.0  # request = start + MARGIN x the work's seconds (the rates' spread: cluster.md)
FLOOR_MINUTES = 10  # no request below this: queueing, a cold file system, hub downloads
ORDERING_D = 1280  # width at which one Kruskal ordering was timed
SEARCHES = 4  # Kruskal searches a layer: the tolerance, a decade either side, paper A's rule
Work = dict[str, float]  # units of work by name (the fields of Rates but start_s)
WIDTH_KEYS = ("hidden_size", "n_embd", "d_model", "embed_dim")  # a config class's d


@dataclass(frozen=True)
class Rates:
    """Seconds per unit of work measured on one device kind, and a job's fixed start."""

    device: str  # what was measured
    start_s: float  # a job's fixed start: Snakemake, interpreter, imports, the device
    synthetic_step: float  # paper A: a batched model's step, whatever its size
    synthetic_shared_flop: float  # paper A: a padded FLOP of a shared-context model
    synthetic_random_flop: float  # paper A: a padded FLOP of a random-context model
    svd_flop: float  # a float64 SVD FLOP on the training device (paper A's certification)
    aot_step: float  # paper B: a batched model's step, whatever its size
    aot_row: float  # paper B: one replica's batch row of a step
    ordering: float  # one Kruskal ordering at d = ORDERING_D on one host worker
    device_ordering: float  # the same batched on the device (kruskal_search: device)
    token_layer: float  # extraction: one token of one example at one stored layer
    certify_flop: float  # certified capacity: a float64 SVD FLOP (host)


UNITS = tuple(f.name for f in fields(Rates) if f.name not in ("device", "start_s"))


def load_rates(root: str | Path) -> dict[str, Rates]:
    """The ``gpu`` and ``cpu`` rates of the committed cost file under the repository ``root``."""
    table = json.loads((Path(root) / COSTS_FILE).read_text())["rates"]
    names = {f.name for f in fields(Rates)}
    return {
        kind: Rates(**{k: v for k, v in row.items() if k in names}) for kind, row in table.items()
    }


def work_seconds(work: Work, rates: Rates) -> float:
    """Seconds of ``work`` at ``rates`` (the start left out)."""
    return sum(amount * getattr(rates, unit) for unit, amount in work.items())


def expected_seconds(work: Work, rates: Rates) -> float:
    """A job's expected wall time: its start and its work, no margin."""
    return rates.start_s + work_seconds(work, rates)


def runtime_minutes(work: Work, rates: Rates) -> int:
    """The SLURM wall-time request of a job doing ``work``."""
    return max(FLOOR_MINUTES, math.ceil((rates.start_s + MARGIN * work_seconds(work, rates)) / 60))


def add(*works: Work) -> Work:
    """The sum of several jobs' work (a job that does all of it)."""
    total: Work = {}
    for work in works:
        for unit, amount in work.items():
            total[unit] = total.get(unit, 0.0) + amount
    return total


# --- paper A -------------------------------------------------------------------------------


def svd_flops(rows: int, cols: int) -> float:
    """FLOPs of the singular values of a rows × cols matrix (Golub-Kahan bidiagonalisation)."""
    m, n = max(rows, cols), min(rows, cols)
    return 4.0 * m * n * n - 4.0 * n**3 / 3.0


def synthetic_work(spec: SweepSpec, stage: StageSettings) -> Work:
    """Work of a job that trains and certifies ``spec`` (a sweep, or one of its settings): at
    least what the protocol may train, whatever the counts memorized. The protocol module
    says which T each series may train at (:func:`~memcap.synthetic.series.passes`, and
    :func:`~memcap.synthetic.series.bracket_passes` for the bracket); this prices them. A
    check that trains each series at one of several T costs the steps of every T's model and
    the FLOPs of the largest T's (budgets and FLOPs grow with T)."""
    seeds = stage.replicate_seeds(spec)
    series = [(s, seed) for s in spec.settings() for seed in seeds]

    def at(T: int, restart: int = 0, budget: int = 0) -> list[Replica]:
        return [Replica(s, seed, T, restart, budget) for s, seed in series]

    def replicas(p: Pass, T: tuple[int, ...]) -> list[Replica]:
        return [
            r for t in T for r in at(t, p.restart, _check_budget(spec, stage, t) if p.longer else 0)
        ]

    plan = passes(spec.T, stage.ladder, stage.convergence)
    work = passes_work(spec, stage, [replicas(p, p.T) for p in plan if not p.longer])
    for trainings, T in bracket_passes(spec.T, stage.ladder):  # per series, at T or below
        one = passes_work(spec, stage, [at(T, budget=_bracket_budget(spec, stage, T))])
        # buckets of any T padded at most BRACKET_PADDING, in the worst case a model a series;
        # each training at the longer of the two budgets
        padded = {u: a * (1 + BRACKET_PADDING) for u, a in one.items() if u != "synthetic_step"}
        padded["synthetic_step"] = one["synthetic_step"] * len(series)
        work = add(work, {unit: trainings * amount for unit, amount in padded.items()})
    for p in (p for p in plan if p.longer):
        if p.one_of:
            steps = passes_work(spec, stage, [replicas(p, p.T)])["synthetic_step"]
            largest = passes_work(spec, stage, [replicas(p, p.T[-1:])])
            work = add(work, largest | {"synthetic_step": steps})
        else:
            work = add(work, passes_work(spec, stage, [replicas(p, p.T)]))
    return work


def _bracket_budget(spec: SweepSpec, stage: StageSettings, T: int) -> int:
    """The longer budget a bracket pass at T or below may train: the check's where it runs,
    else the recipe's (0)."""
    return _check_budget(spec, stage, T) if stage.convergence.enabled else 0


def _check_budget(spec: SweepSpec, stage: StageSettings, T: int) -> int:
    cfg = stage.train_config(spec, T)
    return stage.convergence.factor * cfg.steps * (1 + cfg.extra_budgets)


def passes_work(spec: SweepSpec, stage: StageSettings, passes: list[list[Replica]]) -> Work:
    """Work of training and certifying ``passes`` of replicas, each split into its batched
    models: their steps, their steps × padded FLOPs per step, and two SVDs a replica."""
    work = dict.fromkeys(("synthetic_step", "synthetic_shared_flop", "synthetic_random_flop"), 0.0)
    work["svd_flop"] = 0.0
    for members in passes:
        for group in replica_groups(spec, stage, members).values():
            budget = group[0].budget
            cfg = stage.group_config(spec, group)
            steps = budget or cfg.steps * (1 + cfg.extra_budgets)
            cost = step_cost(stage, group[0].setting.task, cfg.eval_every)
            padded, _ = cost.bucket([step_shape(r, cfg.batch_size) for r in group])
            shared = all(r.setting.context == "shared" for r in group)
            work["synthetic_step"] += steps
            work[f"synthetic_{'shared' if shared else 'random'}_flop"] += steps * padded
            work["svd_flop"] += 2 * sum(svd_flops(r.T, r.setting.H * stage.d) for r in group)
    return work


# --- paper B -------------------------------------------------------------------------------


def aot_models(
    name: str, spec: Mapping[str, Any], stage: AotStage, only: Any = None
) -> list[tuple[int, int, int]]:
    """(steps, replicas, batch rows) of every batched model of sweep ``name`` (``only``: one
    of its settings), grouped as the training groups them
    (:func:`~memcap.aot.settings.group_replicas`)."""
    replicas = [
        (s, seed)
        for s in expand_sweep(name, spec)
        if only in (None, s)
        for seed in stage.replicate_seeds(spec)
    ]
    split = spec["recipe"] != "authors"
    models = []
    for members in group_replicas(replicas, stage.pad_replicas, split, facet_keys(spec)):
        first = members[0][0]
        cfg = stage.train_config(spec, first.T, first.task, first.model)
        models.append((cfg.steps, len(members), cfg.batch_size or first.T))
    return models


def aot_work(name: str, spec: Mapping[str, Any], stage: AotStage, only: Any = None) -> Work:
    """Work of training sweep ``name`` (``only``: one of its settings)."""
    models = aot_models(name, spec, stage, only)
    return {
        "aot_step": float(sum(steps for steps, _, _ in models)),
        "aot_row": float(sum(steps * replicas * rows for steps, replicas, rows in models)),
    }


# --- the real models' stages ---------------------------------------------------------------


def checks_work(layers: Sequence[tuple[int, int]], workers: int, device_search: bool) -> Work:
    """Work of the assumption checks of ``layers``, each (orderings, d), on ``workers``."""
    orderings = sum(SEARCHES * samples * (d / ORDERING_D) ** 3 for samples, d in layers)
    if device_search:
        return {"device_ordering": orderings}
    return {"ordering": orderings / max(1, workers)}


def extract_work(examples: int, tokens: int, layers: int) -> Work:
    """Work of extracting ``layers`` stored layers of ``examples`` inputs of ``tokens``."""
    return {"token_layer": float(examples * tokens * layers)}


def certify_work(examples: int, max_H: int, d: int, layers: int) -> Work:
    """Work of the certified capacity of ``layers`` detail layers: Z (T × H·d) at every H."""
    return {"certify_flop": layers * sum(svd_flops(examples, h * d) for h in range(1, max_H + 1))}


def model_sizes(entry: Any) -> tuple[int, int, int]:
    """(T, n, d) of a typed model entry: n and d as the certify job's memory assumes them where
    the config does not give them (:mod:`memcap.capacity.settings`)."""
    n = entry.n or (VIT_FULL_N if entry.kind == "vit" else TEXT_FULL_N)
    kwargs = entry.model_kwargs or {}
    d = max([MAX_D] + [int(kwargs[key]) for key in WIDTH_KEYS if key in kwargs])
    return entry.data.T, n, d
