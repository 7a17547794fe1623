"""Typed settings of the synthetic stage (paper A): sweeps, settings, replicas, the ladder and
the convergence check as configured, and which replicas share a batched model (config checks:
:mod:`memcap.synthetic.checks`; the walk: :mod:`memcap.synthetic.series`).

Replicas of one task always share a batched model; ``engine.synthetic.group_by`` splits
further by model shape, T and/or context kind, a replica of the convergence check's longer
budget never shares with one of another step count, and ``max_padding`` splits a group into
buckets by the cost model of :mod:`memcap.synthetic.buckets` (:func:`replica_groups`).

No torch import here: the Snakefile imports this module to size the sweep jobs
(:func:`sweep_memory_mb`). The dataclasses carry no defaults: they are built from the
schema-defaulted config.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memcap.synthetic.buckets import StepCost, StepShape, bucket_replicas
from memcap.training.config import TrainConfig, replicate_seeds, with_overrides

SWEEPS = ("heads", "context_size", "head_dim")
# The model parameter each sweep varies, as named in the result tables.
SWEPT = {"heads": "H", "context_size": "n", "head_dim": "d_h"}
CONTEXTS = ("shared", "random")
TASKS = ("classification", "regression")
GROUP_KEYS = ("shape", "T", "context")


@dataclass(frozen=True)
class Setting:
    """One point of a sweep: the model shape, the context kind and the task."""

    sweep: str
    H: int  # heads
    n: int  # context size
    d_h: int  # query/key dimension per head
    context: str
    task: str

    @property
    def value(self) -> int:
        """The swept parameter's value."""
        return getattr(self, SWEPT[self.sweep])


@dataclass(frozen=True)
class Replica:
    """One trained model: a sweep setting, a replicate seed, a dataset size T, a restart
    (0: the first training; k: the k-th retraining from a fresh initialisation) and a budget
    (0: the recipe's own budgets; else the steps of the convergence check's longer training)."""

    setting: Setting
    seed: int
    T: int  # dataset size
    restart: int = 0
    budget: int = 0


@dataclass(frozen=True)
class SweepSpec:
    """One sweep: its values, T grid, fixed parameters, contexts, tasks and step budget."""

    name: str
    values: tuple[int, ...]
    T: tuple[int, ...]  # the T grid, increasing
    H: int  # where not swept
    n: int  # where not swept
    d_h: int  # where not swept
    contexts: tuple[str, ...]
    tasks: tuple[str, ...]
    train: Mapping[str, Any]  # the sweep's own training settings; null keeps the recipe's
    recipe: str  # ours (synthetic.train) or authors (synthetic.authors: paper A's code)
    seeds: int  # replicate seeds per setting (the sweep's own, else synthetic.seeds)

    def settings(self) -> list[Setting]:
        """Every (value, context, task) point, values outermost."""
        points = []
        for value in self.values:
            shape = {"H": self.H, "n": self.n, "d_h": self.d_h, SWEPT[self.name]: value}
            for context in self.contexts:
                for task in self.tasks:
                    points.append(Setting(self.name, context=context, task=task, **shape))
        return points


def sweep_spec(section: Mapping[str, Any], name: str) -> SweepSpec:
    """The :class:`SweepSpec` of sweep ``name`` from the validated ``synthetic`` section."""
    sweep = section["sweeps"][name]
    return SweepSpec(
        name=name,
        values=tuple(sweep["values"]),
        T=tuple(sweep["T"]),
        H=sweep.get("H", 0),
        n=sweep.get("n", 0),
        d_h=sweep.get("d_h", 0),
        contexts=tuple(sweep["contexts"]),
        tasks=tuple(sweep["tasks"]),
        train=sweep["train"],
        recipe=sweep["recipe"],
        seeds=sweep.get("seeds") or section["seeds"],
    )


@dataclass(frozen=True)
class Ladder:
    """How every series walks its T grid (``synthetic.ladder``; the walk itself:
    :mod:`memcap.synthetic.series`)."""

    grow_at: float | None  # a series memorizing this fraction of its largest T grows; None: never
    factor: float  # the next T of a grown grid: factor × T, rounded up
    max_T: int  # no series grows past this T
    warm_start: bool  # each T starts from the series' state at the previous one
    restarts: int  # retrainings from fresh initialisations of a replica that fell along T
    bracket: float | None = None  # fitted_T is bisected until its bracket is this narrow
    past_maximum: bool = False  # a series also grows while its count still rises along T

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> Ladder:
        ladder = section["ladder"]
        keys = ("grow_at", "factor", "max_T", "warm_start", "restarts", "bracket", "past_maximum")
        return cls(*(ladder.get(key) for key in keys))

    def data_size(self, grid: tuple[int, ...]) -> int:
        """Examples drawn per dataset: the largest T any series may reach."""
        return max(grid) if self.grow_at is None else max(max(grid), self.max_T)


@dataclass(frozen=True)
class Convergence:
    """The convergence check (``synthetic.convergence``): every series trained again with
    ``factor`` times its recipe's budget; a setting whose seeds gain more than ``gain`` with
    it is optimiser-limited (:mod:`memcap.synthetic.series`, :mod:`memcap.synthetic.summary`)."""

    factor: int  # 0 or 1: no check
    gain: float  # the relative gain that makes a setting optimiser-limited

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> Convergence:
        check = section["convergence"]
        return cls(int(check["factor"] or 0), float(check["gain"]))

    @property
    def enabled(self) -> bool:
        return self.factor > 1


@dataclass(frozen=True)
class StageSettings:
    """Settings shared by every sweep of the stage, and how it trains (``engine``)."""

    d: int  # token dimension
    classes: int  # C, classification labels
    d_v: int  # value dimension per head (``value_dim``)
    base_seed: int  # the config's global seed; every data, model and batch seed derives from it
    saturation_threshold: float
    train: Mapping[str, Any]  # our recipe's training settings (``synthetic.train``)
    authors: Mapping[str, Any]  # paper A's code's recipe (``synthetic.authors``)
    group_by: tuple[str, ...]  # subset of GROUP_KEYS splitting replicas into batched models
    max_padding: float | None  # cost-model buckets within a group_by group (None: off)
    precision: str  # arithmetic of the training step (float32, tf32, bf16)
    compile: bool  # torch.compile the training step
    cuda_graph: bool  # the whole step captured as one CUDA graph and replayed (CUDA)
    leave_when_fit: bool  # fitted replicas leave their batched model
    ladder: Ladder  # how every series walks its T grid
    convergence: Convergence  # the check of every setting's budget at its capacity
    embedded: bool  # tokens already embedded (real layers' inputs): no W_e, b_e or positions

    @classmethod
    def from_config(
        cls, section: Mapping[str, Any], seed: int, engine: Mapping[str, Any]
    ) -> StageSettings:
        """Build from the validated ``synthetic`` and ``engine`` sections and the global seed."""
        return cls(
            d=section["d"],
            classes=section["classes"],
            d_v=section["value_dim"],
            base_seed=int(seed),
            saturation_threshold=section["saturation_threshold"],
            train=section["train"],
            authors=section["authors"],
            group_by=tuple(engine["synthetic"]["group_by"]),
            max_padding=engine["synthetic"]["max_padding"],
            precision=engine["precision"],
            compile=engine["compile"],
            cuda_graph=engine["cuda_graph"],
            leave_when_fit=engine["synthetic"]["leave_when_fit"],
            ladder=Ladder.from_config(section),
            convergence=Convergence.from_config(section),
            embedded=False,
        )

    def _engine(self) -> dict[str, Any]:
        """How the training loop runs (:class:`TrainConfig`'s fields), the same for both recipes."""
        return {
            "precision": self.precision,
            "compile": self.compile,
            "cuda_graph": self.cuda_graph,
            "leave_when_fit": self.leave_when_fit,
        }

    def replicate_seeds(self, spec: SweepSpec) -> list[int]:
        """The replicate seeds of every setting of sweep ``spec``."""
        return replicate_seeds(self.base_seed, spec.seeds)

    def group_config(self, spec: SweepSpec, members: Sequence[Replica]) -> TrainConfig:
        """The training settings of one batched model of ``members`` (one budget): its
        largest T's, at their budget."""
        return self.train_config(spec, max(r.T for r in members), members[0].budget)

    def train_config(self, spec: SweepSpec, T: int, budget: int = 0) -> TrainConfig:
        """The training settings of sweep ``spec`` for a batched model of up to ``T`` examples;
        ``budget`` > 0: that many steps in one budget (the convergence check's training).

        Ours: ``synthetic.train`` with the sweep's own values. Authors' (paper A's code):
        max(epochs · T / batch_size, steps) steps of batches of ``batch_size``, a warm-up
        from ``warmup_start`` · lr, cosine decay to zero, and the best-loss state.
        """
        if spec.recipe != "authors":
            train = with_overrides(self.train, spec.train)
            if budget:
                train = {**train, "steps": budget, "extra_budgets": 0}
            return TrainConfig(**train, **self._engine())
        train = with_overrides(self.authors, spec.train)
        steps = budget or max(math.ceil(train["epochs"] * T / train["batch_size"]), train["steps"])
        return TrainConfig(
            steps=steps,
            lr=train["lr"],
            warmup_frac=train["warmup_frac"],
            schedule="cosine",
            batch_size=train["batch_size"],
            eval_every=min(train["eval_every"], steps),
            early_stop=train["early_stop"],
            regression_tol=self.train["regression_tol"],
            warmup_start=train["warmup_start"],
            best_by="loss",
            **self._engine(),
        )


def sweep_names(section: Mapping[str, Any]) -> list[str]:
    """Names of the sweeps the config switches on, in canonical order."""
    return [name for name in SWEEPS if section["sweeps"][name].get("enabled", True)]


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
