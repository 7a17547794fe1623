"""The one training loop of the code base: many replicas trained at once as one batched model.

A *replica* is one independent model (one dataset size T, seed, head count ...). Every
parameter of a replica-batched model carries a leading replica axis R, and ``model(inputs)``
maps inputs of shape (R, B, ...) to outputs of shape (R, B, ...). Replica r's loss depends
only on replica r's parameters, and Adam is element-wise, so one optimizer step on the sum of
the per-replica losses performs exactly R independent Adam steps, in one batched pass.

Each step (:mod:`~memcap.training.step`; replayed as a CUDA graph by
:mod:`~memcap.training.graph`) runs the model's own forward and autograd. Settings come from
:class:`~memcap.training.config.TrainConfig`: precision (:func:`matmul_precision`),
``leave_when_fit`` and ``extra_budgets``: further budgets for the replicas still learning when
a budget ends (:mod:`~memcap.training.plateau`). Every ``eval_every`` steps :func:`evaluate`
scores every replica on its whole training set, and a :class:`Record` keeps each replica's best
state, evaluations and loss curve. The host reads the device at evaluations only.

Whatever the precision, training flushes subnormal floats to zero on the CPU
(:func:`subnormals_flushed`): as gradients and attention weights fade late in training,
subnormal values make the CPU's arithmetic tens of times slower, and they move no weight:
Adam's update of a parameter from such a gradient is below that parameter's own rounding.
``tf32`` sets TF32 matmuls on CUDA while training runs (no effect elsewhere, logged: the CPU
keeps float32).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from memcap.training.config import BestBy, Precision, TrainConfig, lr_multipliers
from memcap.training.data import (
    Objective,
    ReplicaData,
    example_correct,
    example_losses,
)
from memcap.training.graph import GraphedUpdate
from memcap.training.plateau import still_learning
from memcap.training.step import ActiveReplicas, AutogradStep, EagerUpdate, Step

_logger = logging.getLogger(__name__)


def train_replicas(
    model: nn.Module,
    data: ReplicaData,
    objective: Objective,
    cfg: TrainConfig,
    seeds: Sequence[int],
    step: Step | None = None,
) -> TrainResult:
    """Train all replicas of ``model`` on ``data`` with Adam; keep each replica's best state.

    Args:
        model: replica-batched model; every parameter has leading axis R.
        data: the replicas' training sets.
        objective: loss and memorization criterion.
        cfg: optimisation settings.
        seeds: one seed per replica for its mini-batch stream.
        step: how outputs and gradients are computed; None: the model's forward and
            autograd (:class:`~memcap.training.step.AutogradStep`).

    Returns:
        Per-replica metrics at each replica's best evaluation; the model is left holding each
        replica's best parameters.
    """
    _check_replica_axis(model, data.replicas, len(seeds))
    device = data.sizes.device
    step = step or AutogradStep(cfg, device)
    keep_freed_memory()  # the step's tensors are freed and allocated again every step
    with matmul_precision(cfg.precision, device), subnormals_flushed():
        active = ActiveReplicas(model, data, cfg, seeds)
        _logger.info("training %d replicas through the %s step", data.replicas, step.name)
        record = Record.start(model, evaluate(model, data, objective, cfg.regression_tol, step))
        if cfg.leave_when_fit and not record.all_fit(active.index):
            _leave(active, record.best_metrics["accuracy"])
        for budget in range(1 + cfg.extra_budgets):
            if budget and not _keep_learning(active, record):
                break
            _train_budget(active, record, step, objective, cfg, budget)
    record.restore_best(model)
    _logger.info("trained %d replicas for up to %d steps", data.replicas, record.steps_run.max())
    return record.result()


def _train_budget(
    active: ActiveReplicas,
    record: Record,
    step: Step,
    objective: Objective,
    cfg: TrainConfig,
    budget: int,
) -> None:
    """Budget ``budget`` (0: the first) of ``cfg.steps`` steps, with its own warm-up and decay
    from ``lr`` (extra budgets: ``lr · extra_lr_frac``), for the replicas of ``active``."""
    done = budget * cfg.steps  # steps the active replicas took in earlier budgets
    peak = cfg.lr * (cfg.extra_lr_frac if budget else 1.0)
    all_fit = record.all_fit(active.index)
    progress = tqdm(range(cfg.steps), desc=f"train {len(active.index)} replicas", mininterval=5.0)
    update = updater(active, step, objective, cfg)
    rates = [peak * factor for factor in lr_multipliers(cfg)]  # LambdaLR's rates
    for k in progress:
        if (cfg.early_stop or cfg.leave_when_fit) and all_fit:
            break  # with leaving, every replica fitted means none is left to train
        outputs, targets, weights = update(rates[k])
        if k >= cfg.steps - cfg.last_batches:
            right = example_correct(outputs, targets, objective, cfg.regression_tol)
            record.batch_correct += (right * weights).sum(1)
            record.batch_count += 1
        if (k + 1) % cfg.eval_every == 0 or k + 1 == cfg.steps:
            metrics = evaluate(active.model, active.data, objective, cfg.regression_tol, step)
            record.evaluated(active.model, metrics, active.index, done + k + 1, cfg.best_by)
            all_fit = record.all_fit(active.index)
            if cfg.leave_when_fit and not all_fit and k + 1 < cfg.steps:
                _leave(active, metrics["accuracy"])
            fit = int((record.fit_step >= 0).sum())
            progress.set_postfix(fit=fit, loss=float(record.current_loss.mean()))


def _keep_learning(active: ActiveReplicas, record: Record) -> bool:
    """Keep the replicas still learning for another budget; False if there are none."""
    fitted = record.fit_step.cpu().numpy() >= 0
    learning = still_learning(np.stack(record.curve), record.evaluations, fitted)
    staying = torch.as_tensor(learning, device=active.index.device)[active.index]
    if not bool(staying.any()):
        return False
    if not bool(staying.all()):
        active.select(staying.nonzero().squeeze(1))
    return True


def _leave(active: ActiveReplicas, accuracy: Tensor) -> None:
    """Replicas of ``active`` at 100% leave the batch (their best state stays kept)."""
    staying = accuracy < 1.0
    if not bool(staying.all()):
        active.select(staying.nonzero().squeeze(1))


def updater(
    active: ActiveReplicas, step: Step, objective: Objective, cfg: TrainConfig
) -> EagerUpdate:
    """The update the loop runs: graphed where ``cfg.cuda_graph`` asks and the device is
    CUDA, else eager (a CUDA graph asked for elsewhere is logged and ignored)."""
    if cfg.cuda_graph:
        if active.index.device.type == "cuda":
            return GraphedUpdate(active, step, objective, cfg)
        _logger.info("cuda_graph has no effect on %s: eager steps", active.index.device.type)
    return EagerUpdate(active, step, objective, cfg)


def _check_replica_axis(model: nn.Module, replicas: int, n_seeds: int) -> None:
    if n_seeds != replicas:
        raise ValueError(f"{n_seeds} seeds given for {replicas} replicas")
    for name, p in model.named_parameters():
        if p.dim() == 0 or p.shape[0] != replicas:
            raise ValueError(
                f"parameter '{name}' has shape {tuple(p.shape)}; every parameter needs a "
                f"leading replica axis of size {replicas}"
            )


CUDA_ROWS = 2**18  # replica × example rows of one evaluation chunk on a GPU


@torch.no_grad()
def evaluate(
    model: nn.Module,
    data: ReplicaData,
    objective: Objective,
    regression_tol: float | None,
    step: Step | None = None,
    chunk: int = 4096,
) -> dict[str, Tensor]:
    """Full-data loss, memorized count, accuracy and KL of every replica, in example chunks
    (on a GPU at most :data:`CUDA_ROWS` replica-examples a chunk), with ``step``'s outputs
    (None: the model's own forward)."""
    loss = torch.zeros(data.replicas, device=data.sizes.device)
    correct = torch.zeros_like(loss)
    for inputs, targets, valid in chunks(data, chunk):
        outputs = model(*inputs) if step is None else step.outputs(model, inputs)
        loss += (example_losses(outputs, targets, objective) * valid).sum(1)
        correct += (example_correct(outputs, targets, objective, regression_tol) * valid).sum(1)
    sizes = data.sizes.float()
    mean_loss = loss / sizes
    kl = mean_loss if objective == "distribution" else torch.full_like(loss, float("nan"))
    return {"loss": mean_loss, "memorized": correct, "accuracy": correct / sizes, "kl": kl}


def chunks(
    data: ReplicaData, chunk: int = 4096
) -> Iterator[tuple[tuple[Tensor, ...], Tensor, Tensor]]:
    """Inputs (:meth:`~memcap.training.data.ReplicaData.examples`), targets and valid-example
    weights (R, B) of every example chunk an evaluation reads, in order; on a GPU at most
    :data:`CUDA_ROWS` replica-examples a chunk."""
    mask = data.mask().float()
    t_max = data.targets.shape[1]
    if mask.device.type == "cuda":  # a GPU's memory bounds the chunk's intermediates
        chunk = min(chunk, max(256, CUDA_ROWS // data.replicas))
    for start in range(0, t_max, chunk):
        rows = slice(start, min(t_max, start + chunk))
        yield data.examples(rows), data.targets[:, rows], mask[:, rows]


@dataclass
class TrainResult:
    """Per-replica outcome (numpy arrays of length R) of a training run."""

    accuracy: np.ndarray  # fraction of the training set memorized (best evaluation)
    memorized: np.ndarray  # number of training examples memorized (best evaluation)
    loss: np.ndarray  # training loss at the best evaluation
    kl: np.ndarray  # mean KL(target || model); NaN unless the objective is distribution
    fit_step: np.ndarray  # first step with 100% memorized, -1 if never
    batch_accuracy: np.ndarray  # mean training-batch accuracy of the last cfg.last_batches steps
    steps_run: np.ndarray  # optimizer steps each replica took (early stop, leaving: fewer)
    loss_curve: np.ndarray  # (1 + evaluations, R) loss at the start and at each evaluation
    evaluations: np.ndarray  # evaluations each replica took part in: its curve's length - 1


@dataclass
class Record:
    """What a training run keeps across its budgets, for every replica (length R)."""

    best: dict[str, Tensor]  # each replica's best parameters so far
    best_metrics: dict[str, Tensor]  # their evaluation
    fit_step: Tensor  # first step at 100% memorized, -1 if never
    current_loss: Tensor  # loss at each replica's latest evaluation (kept after it left)
    batch_correct: Tensor  # right examples of the last batches
    curve: list[np.ndarray]  # current_loss at the start and after every evaluation
    evaluations: np.ndarray  # evaluations each replica took part in
    steps_run: np.ndarray  # steps each replica took
    batch_count: int = 0

    @classmethod
    def start(cls, model: nn.Module, metrics: dict[str, Tensor]) -> Record:
        """The record before the first step: ``metrics`` of the initial ``model``."""
        replicas = len(metrics["loss"])
        return cls(
            best={name: p.detach().clone() for name, p in model.named_parameters()},
            best_metrics=metrics,
            fit_step=torch.where(metrics["accuracy"] >= 1.0, 0, -1),
            current_loss=metrics["loss"].clone(),
            batch_correct=torch.zeros_like(metrics["loss"]),
            curve=[metrics["loss"].cpu().numpy().copy()],  # on the CPU, .numpy() shares memory
            evaluations=np.zeros(replicas, int),
            steps_run=np.zeros(replicas, int),
        )

    def all_fit(self, index: Tensor) -> bool:
        """Whether every replica at original positions ``index`` has fitted (a host read)."""
        return bool((self.fit_step[index] >= 0).all())

    def evaluated(
        self,
        model: nn.Module,
        metrics: dict[str, Tensor],
        index: Tensor,
        steps: int,
        best_by: BestBy,
    ) -> None:
        """Take an evaluation of the replicas at ``index`` after ``steps`` steps each: their
        curves, fit steps, and best states (``model`` holds them in ``index`` order)."""
        self.current_loss[index] = metrics["loss"]
        self.curve.append(self.current_loss.cpu().numpy().copy())
        on_host = index.cpu().numpy()
        self.evaluations[on_host] += 1
        self.steps_run[on_host] = steps
        kept = {key: value[index] for key, value in self.best_metrics.items()}
        better = improved(metrics, kept, best_by)
        with torch.no_grad():
            for name, p in model.named_parameters():
                chosen = better.view(-1, *([1] * (p.dim() - 1)))
                self.best[name][index] = torch.where(chosen, p, self.best[name][index])
        for key in self.best_metrics:
            self.best_metrics[key][index] = torch.where(better, metrics[key], kept[key])
        newly_fit = (self.fit_step[index] < 0) & (metrics["accuracy"] >= 1.0)
        self.fit_step[index] = torch.where(newly_fit, steps, self.fit_step[index])

    def restore_best(self, model: nn.Module) -> None:
        """Load every replica's best parameters into ``model`` (all replicas' axis)."""
        with torch.no_grad():
            for name, p in model.named_parameters():
                p.copy_(self.best[name])

    def result(self) -> TrainResult:
        """The per-replica outcome at each replica's best evaluation."""
        metrics = self.best_metrics
        batch_accuracy = (
            (self.batch_correct / self.batch_count).cpu().numpy()
            if self.batch_count
            else np.full(len(self.steps_run), np.nan)
        )
        return TrainResult(
            accuracy=metrics["accuracy"].cpu().numpy(),
            memorized=metrics["memorized"].round().long().cpu().numpy(),
            loss=metrics["loss"].cpu().numpy(),
            kl=metrics["kl"].cpu().numpy(),
            fit_step=self.fit_step.cpu().numpy(),
            batch_accuracy=batch_accuracy,
            steps_run=self.steps_run,
            loss_curve=np.stack(self.curve),
            evaluations=self.evaluations,
        )


def improved(new: dict[str, Tensor], old: dict[str, Tensor], best_by: BestBy) -> Tensor:
    """(R,) whether the new evaluation beats the best so far (more memorized, then lower loss).

    With ``best_by = "loss"`` only the loss counts (paper A's best-loss checkpoint).
    """
    if best_by == "loss":
        return new["loss"] < old["loss"]
    more = new["memorized"] > old["memorized"]
    tie = new["memorized"] == old["memorized"]
    return more | (tie & (new["loss"] < old["loss"]))


def keep_freed_memory() -> None:
    """Let glibc's malloc keep freed memory for reuse instead of returning it to the system.

    A training step allocates and frees the same few tensors of up to a few MB thousands of
    times. By default glibc serves blocks that large with ``mmap`` and gives them back on free
    (or trims the heap top), so every step would fault its pages in again, the kernel
    zeroing pages at every step. Process-wide; called by
    :func:`~memcap.training.loop.train_replicas`; a no-op where the C library has no
    ``mallopt``.
    """
    if not sys.platform.startswith("linux"):
        return
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:
        return
    m_trim_threshold, m_mmap_threshold = -1, -3
    mallopt(m_mmap_threshold, 32 * 2**20)  # glibc's largest; bigger blocks still use mmap
    mallopt(m_trim_threshold, 2**30)


@contextlib.contextmanager
def matmul_precision(precision: Precision, device: torch.device) -> Iterator[None]:
    """TF32 matmuls on CUDA while the block runs when ``precision`` is "tf32"."""
    if precision != "tf32":
        yield
        return
    if device.type != "cuda":
        _logger.info("precision tf32 has no effect on %s: training stays float32", device.type)
        yield
        return
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


@contextlib.contextmanager
def subnormals_flushed() -> Iterator[None]:
    """Subnormal floats read and written as zero on the CPU (x86 FTZ/DAZ) while the block
    runs; the default (kept) after."""
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)
