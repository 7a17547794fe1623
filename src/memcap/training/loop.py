"""The one training loop of the code base: many replicas trained at once as one batched model.

A *replica* is one independent model (one dataset size T, seed, head count ...). Every
parameter of a replica-batched model carries a leading replica axis R, and ``model(inputs)``
maps inputs of shape (R, B, ...) to outputs of shape (R, B, ...). Replica r's loss depends
only on replica r's parameters, and Adam is element-wise, so one optimizer step on the sum of
the per-replica losses performs exactly R independent Adam steps, in one batched pass.

Both papers' experiments (:mod:`memcap.synthetic`, :mod:`memcap.aot`) train through
:func:`train_replicas`, with settings from :class:`memcap.training.config.TrainConfig`: its
precision (:mod:`~memcap.training.precision`), ``compile`` (``torch.compile`` of the step),
``leave_when_fit`` (:mod:`~memcap.training.active`) and ``extra_budgets``: further budgets for
the replicas still learning when a budget ends (:mod:`~memcap.training.plateau`). The host
reads the device at evaluations only.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from memcap.training.active import ActiveReplicas, SelectReplicas
from memcap.training.allocator import keep_freed_memory
from memcap.training.config import TrainConfig
from memcap.training.data import ReplicaData, gather_rows
from memcap.training.objectives import Objective, example_correct, example_losses
from memcap.training.plateau import still_learning
from memcap.training.precision import matmul_precision

_logger = logging.getLogger(__name__)


@dataclass
class TrainResult:
    """Per-replica outcome (numpy arrays of length R) of :func:`train_replicas`."""

    accuracy: np.ndarray  # fraction of the training set memorized (best evaluation)
    memorized: np.ndarray  # number of training examples memorized (best evaluation)
    loss: np.ndarray  # training loss at the best evaluation
    kl: np.ndarray  # mean KL(target || model); NaN unless the objective is distribution
    fit_step: np.ndarray  # first step with 100% memorized, -1 if never
    batch_accuracy: np.ndarray  # mean training-batch accuracy of the last cfg.last_batches steps
    steps_run: np.ndarray  # optimizer steps each replica took (early stop, leaving: fewer)
    loss_curve: np.ndarray  # (1 + evaluations, R) loss at the start and at each evaluation
    evaluations: np.ndarray  # evaluations each replica took part in: its curve's length - 1


def lr_multiplier(step: int, cfg: TrainConfig) -> float:
    """Learning-rate factor at ``step``: linear warm-up, then cosine / linear / constant.

    The factor changes every ``cfg.lr_period`` steps (1: every step; an epoch's batch count:
    PyTorch's per-epoch ``LinearLR``). The warm-up rises from ``warmup_start``; linear and
    cosine decay end at ``final_lr_frac``.
    """
    tick, ticks = step // cfg.lr_period, math.ceil(cfg.steps / cfg.lr_period)
    warmup = int(cfg.warmup_frac * ticks)
    if tick < warmup:
        return cfg.warmup_start + (1.0 - cfg.warmup_start) * (tick + 1) / warmup
    progress = (tick - warmup) / max(1, ticks - warmup)
    floor = cfg.final_lr_frac
    if cfg.schedule == "cosine":
        return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))
    if cfg.schedule == "linear":
        return 1.0 - (1.0 - floor) * progress
    return 1.0


@torch.no_grad()
def evaluate(
    model: nn.Module,
    data: ReplicaData,
    objective: Objective,
    regression_tol: float | None,
    chunk: int = 4096,
) -> dict[str, Tensor]:
    """Full-data loss, memorized count, accuracy and KL of every replica, in example chunks."""
    mask = data.mask()
    t_max = data.targets.shape[1]
    loss = torch.zeros(data.replicas, device=mask.device)
    correct = torch.zeros_like(loss)
    for start in range(0, t_max, chunk):
        if t_max <= chunk:  # the data's own tensors (a model may cache what it derives)
            inputs, targets, valid = data.inputs, data.targets, mask.float()
        else:
            index = torch.arange(start, min(t_max, start + chunk), device=mask.device)
            index = index.expand(data.replicas, -1)
            inputs, targets = data.take(index)
            valid = gather_rows(mask, index).float()
        outputs = model(*inputs)
        loss += (example_losses(outputs, targets, objective) * valid).sum(1)
        correct += (example_correct(outputs, targets, objective, regression_tol) * valid).sum(1)
    sizes = data.sizes.float()
    mean_loss = loss / sizes
    kl = mean_loss if objective == "distribution" else torch.full_like(loss, float("nan"))
    return {"loss": mean_loss, "memorized": correct, "accuracy": correct / sizes, "kl": kl}


def train_replicas(
    model: nn.Module,
    data: ReplicaData,
    objective: Objective,
    cfg: TrainConfig,
    seeds: Sequence[int],
    select: SelectReplicas | None = None,
) -> TrainResult:
    """Train all replicas of ``model`` on ``data`` with Adam; keep each replica's best state.

    Args:
        model: replica-batched model; every parameter has leading axis R.
        data: the replicas' training sets.
        objective: loss and memorization criterion.
        cfg: optimisation settings.
        seeds: one seed per replica for its mini-batch stream.
        select: compacts the model's replica-axis buffers when replicas leave
            (``cfg.leave_when_fit``; :mod:`memcap.training.active`).

    Returns:
        Per-replica metrics at each replica's best evaluation; the model is left holding each
        replica's best parameters.
    """
    _check_replica_axis(model, data.replicas, len(seeds))
    keep_freed_memory()  # the step's tensors are freed and allocated again every step
    with matmul_precision(cfg.precision, data.sizes.device):
        return _train(model, ActiveReplicas(model, data, cfg, seeds, select), objective, cfg)


def _train(
    model: nn.Module, active: ActiveReplicas, objective: Objective, cfg: TrainConfig
) -> TrainResult:
    """:func:`train_replicas` on ``active``, one budget and then the extra ones; the host
    waits for the device at evaluations only (the early-stop flag and the progress bar)."""
    run = _Run.start(model, evaluate(model, active.data, objective, cfg.regression_tol))
    if cfg.leave_when_fit and not run.all_fit(active):
        _leave(active, run.best_metrics["accuracy"])
    step_loss = _compiled(active) if cfg.compile else _step_loss
    for budget in range(1 + cfg.extra_budgets):
        if budget and not _keep_learning(active, run):
            break
        _train_budget(active, run, step_loss, objective, cfg, budget)
    _restore_best(model, run.best)
    _logger.info("trained %d replicas for up to %d steps", len(run.steps_run), run.steps_run.max())
    metrics = run.best_metrics
    batch_accuracy = (
        (run.batch_correct / run.batch_count).cpu().numpy()
        if run.batch_count
        else np.full(len(run.steps_run), np.nan)
    )
    return TrainResult(
        accuracy=metrics["accuracy"].cpu().numpy(),
        memorized=metrics["memorized"].round().long().cpu().numpy(),
        loss=metrics["loss"].cpu().numpy(),
        kl=metrics["kl"].cpu().numpy(),
        fit_step=run.fit_step.cpu().numpy(),
        batch_accuracy=batch_accuracy,
        steps_run=run.steps_run,
        loss_curve=np.stack(run.curve),
        evaluations=run.evaluations,
    )


@dataclass
class _Run:
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
    def start(cls, model: nn.Module, metrics: dict[str, Tensor]) -> _Run:
        """The run before its first step: ``metrics`` of the initial ``model``."""
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

    def all_fit(self, active: ActiveReplicas) -> bool:
        """Whether every replica still training has fitted (a host read)."""
        return bool((self.fit_step[active.index] >= 0).all())


def _keep_learning(active: ActiveReplicas, run: _Run) -> bool:
    """Keep the replicas still learning for another budget; False if there are none."""
    fitted = run.fit_step.cpu().numpy() >= 0
    learning = still_learning(np.stack(run.curve), run.evaluations, fitted)
    staying = torch.as_tensor(learning, device=active.index.device)[active.index]
    if not bool(staying.any()):
        return False
    if not bool(staying.all()):
        active.keep(staying.nonzero().squeeze(1))
    return True


def _train_budget(
    active: ActiveReplicas,
    run: _Run,
    step_loss: Callable,
    objective: Objective,
    cfg: TrainConfig,
    budget: int,
) -> None:
    """Budget ``budget`` (0: the first) of ``cfg.steps`` steps, with its own warm-up and decay
    from ``lr`` (extra budgets: ``lr · extra_lr_frac``), for the replicas of ``active``."""
    done = budget * cfg.steps  # steps the active replicas took in earlier budgets
    peak = cfg.lr * (cfg.extra_lr_frac if budget else 1.0)
    best_metrics = run.best_metrics
    all_fit = run.all_fit(active)
    progress = tqdm(range(cfg.steps), desc=f"train {len(active.index)} replicas", mininterval=5.0)
    for step in progress:
        # with leaving, every replica fitted means none is left to train
        if (cfg.early_stop or cfg.leave_when_fit) and all_fit:
            break
        loss, outputs, targets, weights = _forward(active, step_loss, objective, cfg)
        if loss.requires_grad:  # else the model's gradient_step has set the gradients
            loss.backward()
        if active.compute is not None:
            active.compute.push_gradients()
        active.optimizer.step(peak * lr_multiplier(step, cfg))  # torch's LambdaLR, step by step
        if step >= cfg.steps - cfg.last_batches:
            right = example_correct(outputs.detach(), targets, objective, cfg.regression_tol)
            run.batch_correct += (right * weights).sum(1)
            run.batch_count += 1
        if (step + 1) % cfg.eval_every == 0 or step + 1 == cfg.steps:
            index = active.index
            metrics = evaluate(active.model, active.data, objective, cfg.regression_tol)
            run.current_loss[index] = metrics["loss"]
            run.curve.append(run.current_loss.cpu().numpy().copy())
            on_host = index.cpu().numpy()
            run.evaluations[on_host] += 1
            run.steps_run[on_host] = done + step + 1
            kept = {key: value[index] for key, value in best_metrics.items()}
            improved = _improved(metrics, kept, cfg.best_by)
            _keep_best(active.model, run.best, improved, index)
            for key in best_metrics:
                best_metrics[key][index] = torch.where(improved, metrics[key], kept[key])
            newly_fit = (run.fit_step[index] < 0) & (metrics["accuracy"] >= 1.0)
            run.fit_step[index] = torch.where(newly_fit, done + step + 1, run.fit_step[index])
            all_fit = run.all_fit(active)
            if cfg.leave_when_fit and not all_fit and step + 1 < cfg.steps:
                _leave(active, metrics["accuracy"])
            progress.set_postfix(
                fit=int((run.fit_step >= 0).sum()), loss=float(run.current_loss.mean())
            )


def _step_loss(
    model: nn.Module,
    inputs: tuple[Tensor, ...],
    targets: Tensor,
    weights: Tensor,
    objective: Objective,
) -> tuple[Tensor, Tensor]:
    """The summed per-replica training loss (float32) and the outputs of one step."""
    # The loss inside the model's own backward, where it has one: in float32 only (a bfloat16
    # compute copy takes its loss in float32 from the outputs below).
    fused = getattr(model, "weighted_loss", None)
    if fused is not None and next(model.parameters()).dtype == torch.float32:
        per_replica, outputs = fused(*inputs, targets, weights, objective)
        return per_replica.sum(), outputs
    outputs = model(*inputs).float()  # a float32 output is returned as it is
    per_replica = (example_losses(outputs, targets, objective) * weights).sum(1)
    return per_replica.sum(), outputs


def _forward(
    active: ActiveReplicas, step_loss: Callable, objective: Objective, cfg: TrainConfig
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Loss, outputs, targets and example weights of one training step of ``active``."""
    active.optimizer.zero_grad()
    inputs, targets, weights = active.batch(cfg.batch_size)
    if active.compute is not None:
        active.compute.pull()
        inputs = active.compute.inputs(inputs)
    direct = getattr(active.step_model, "gradient_step", None)
    if direct is not None and active.compute is None and not cfg.compile:
        # the model's step without autograd, where it has one (None: it has not)
        stepped = direct(*inputs, targets, weights, objective)
        if stepped is not None:
            return stepped[0].sum(), stepped[1], targets, weights
    loss, outputs = step_loss(active.step_model, inputs, targets, weights, objective)
    return loss, outputs, targets, weights


def _compiled(active: ActiveReplicas) -> Callable:
    """``torch.compile`` of :func:`_step_loss` (its backward too); CUDA graphs on CUDA."""
    cuda = active.data.sizes.device.type == "cuda"
    # Dynamo caches compiled graphs per function: every batched model of a sweep and every
    # compaction (replicas leaving) is a new shape, more than the default limit of 8 (past
    # it, torch runs the step eagerly without saying so at the default log level).
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
    return torch.compile(_step_loss, mode="reduce-overhead" if cuda else "default")


def _leave(active: ActiveReplicas, accuracy: Tensor) -> None:
    """Replicas of ``active`` at 100% leave the batch (their best state stays kept)."""
    staying = accuracy < 1.0
    if not bool(staying.all()):
        active.keep(staying.nonzero().squeeze(1))


def _improved(new: dict[str, Tensor], old: dict[str, Tensor], best_by: str) -> Tensor:
    """(R,) whether the new evaluation beats the best so far (more memorized, then lower loss).

    With ``best_by = "loss"`` only the loss counts (paper A's best-loss checkpoint).
    """
    if best_by == "loss":
        return new["loss"] < old["loss"]
    more = new["memorized"] > old["memorized"]
    tie = new["memorized"] == old["memorized"]
    return more | (tie & (new["loss"] < old["loss"]))


def _keep_best(model: nn.Module, best: dict[str, Tensor], improved: Tensor, index: Tensor) -> None:
    """Copy the improved replicas' parameters into ``best`` at their original positions."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            sel = improved.view(-1, *([1] * (p.dim() - 1)))
            best[name][index] = torch.where(sel, p, best[name][index])


def _restore_best(model: nn.Module, best: dict[str, Tensor]) -> None:
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(best[name])


def _check_replica_axis(model: nn.Module, replicas: int, n_seeds: int) -> None:
    if n_seeds != replicas:
        raise ValueError(f"{n_seeds} seeds given for {replicas} replicas")
    for name, p in model.named_parameters():
        if p.dim() == 0 or p.shape[0] != replicas:
            raise ValueError(
                f"parameter '{name}' has shape {tuple(p.shape)}; every parameter needs a "
                f"leading replica axis of size {replicas}"
            )
