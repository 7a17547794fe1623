"""The one training loop of the code base: many replicas trained at once as one batched model.

A *replica* is one independent model (one dataset size T, seed, head count ...). Every
parameter of a replica-batched model carries a leading replica axis R, and ``model(inputs)``
maps inputs of shape (R, B, ...) to outputs of shape (R, B, ...). Replica r's loss depends
only on replica r's parameters, and Adam is element-wise, so one optimizer step on the sum of
the per-replica losses performs exactly R independent Adam steps, in one batched pass.

Each step (:mod:`~memcap.training.update`: eager, or replayed as a CUDA graph) runs through a
:class:`~memcap.training.engine.Step`: the model's own forward and autograd. Settings come from
:class:`~memcap.training.config.TrainConfig`: precision (:mod:`~memcap.training.precision`;
subnormal floats are flushed to zero whatever it is),
``leave_when_fit`` (:mod:`~memcap.training.active`) and ``extra_budgets``: further budgets
for the replicas still learning when a budget ends (:mod:`~memcap.training.plateau`). The
host reads the device at evaluations only.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from memcap.training.active import ActiveReplicas
from memcap.training.allocator import keep_freed_memory
from memcap.training.config import TrainConfig
from memcap.training.data import ReplicaData
from memcap.training.engine import AutogradStep, Step
from memcap.training.evaluation import evaluate
from memcap.training.objectives import Objective, example_correct
from memcap.training.plateau import still_learning
from memcap.training.precision import matmul_precision, subnormals_flushed
from memcap.training.record import Record, TrainResult
from memcap.training.schedule import lr_multipliers
from memcap.training.update import updater

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
            autograd (:class:`~memcap.training.engine.AutogradStep`).

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


def _check_replica_axis(model: nn.Module, replicas: int, n_seeds: int) -> None:
    if n_seeds != replicas:
        raise ValueError(f"{n_seeds} seeds given for {replicas} replicas")
    for name, p in model.named_parameters():
        if p.dim() == 0 or p.shape[0] != replicas:
            raise ValueError(
                f"parameter '{name}' has shape {tuple(p.shape)}; every parameter needs a "
                f"leading replica axis of size {replicas}"
            )
