"""The one training loop of the code base: many replicas trained at once as one batched model.

A *replica* is one independent model (one dataset size T, seed, head count ...). Every
parameter of a replica-batched model carries a leading replica axis R, and ``model(inputs)``
maps inputs of shape (R, B, ...) to outputs of shape (R, B, ...). Replica r's loss depends
only on replica r's parameters, and Adam is element-wise, so one optimizer step on the sum of
the per-replica losses performs exactly R independent Adam steps, in one batched pass.

Both papers' experiments (:mod:`memcap.synthetic`, :mod:`memcap.aot`) train through
:func:`train_replicas`, with settings from :class:`memcap.training.config.TrainConfig`: its
precision (:mod:`~memcap.training.precision`), ``compile`` (``torch.compile`` of the step)
and ``leave_when_fit`` (:mod:`~memcap.training.active`). The host reads the device at
evaluations only.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from memcap.training.active import ActiveReplicas, SelectReplicas
from memcap.training.allocator import keep_freed_memory
from memcap.training.config import TrainConfig
from memcap.training.data import ReplicaData, gather_rows
from memcap.training.precision import matmul_precision

_logger = logging.getLogger(__name__)

Objective = Literal["classification", "regression", "distribution"]


@dataclass
class TrainResult:
    """Per-replica outcome (numpy arrays of length R) of :func:`train_replicas`."""

    accuracy: np.ndarray  # fraction of the training set memorized (best evaluation)
    memorized: np.ndarray  # number of training examples memorized (best evaluation)
    loss: np.ndarray  # training loss at the best evaluation
    kl: np.ndarray  # mean KL(target || model); NaN unless the objective is distribution
    fit_step: np.ndarray  # first step with 100% memorized, -1 if never
    batch_accuracy: np.ndarray  # mean training-batch accuracy of the last cfg.last_batches steps
    steps_run: int  # optimizer steps actually taken (early stop may end sooner)
    loss_curve: np.ndarray  # (evaluations, R) training loss at each evaluation


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


def example_losses(outputs: Tensor, targets: Tensor, objective: Objective) -> Tensor:
    """Per-example loss of shape (R, B)."""
    if objective == "classification":
        return nn.functional.cross_entropy(
            outputs.flatten(0, 1), targets.flatten(), reduction="none"
        ).view(targets.shape)
    if objective == "regression":
        return (outputs - targets) ** 2
    return kl_divergence(targets, outputs)


def kl_divergence(target_probs: Tensor, logits: Tensor) -> Tensor:
    """KL(target ‖ softmax(logits)) over the last axis, with 0·log 0 = 0."""
    log_q = torch.log_softmax(logits, dim=-1)
    log_p = torch.where(target_probs > 0, target_probs.log(), torch.zeros_like(target_probs))
    return (target_probs * (log_p - log_q)).sum(-1)


def example_correct(
    outputs: Tensor, targets: Tensor, objective: Objective, regression_tol: float | None
) -> Tensor:
    """(R, B) True where the example is memorized (top logit right / error under tolerance)."""
    if objective == "classification":
        return outputs.argmax(-1) == targets
    if objective == "regression":
        if regression_tol is None:
            raise ValueError("the regression objective needs a regression_tol")
        return (outputs - targets).abs() < regression_tol
    return outputs.argmax(-1) == targets.argmax(-1)


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
    """:func:`train_replicas` on ``active``; the host waits for the device at evaluations
    only (the early-stop flag and the progress bar are read there)."""
    data = active.data
    replicas = data.replicas
    best = {name: p.detach().clone() for name, p in model.named_parameters()}
    best_metrics = evaluate(model, data, objective, cfg.regression_tol)
    fit_step = torch.where(best_metrics["accuracy"] >= 1.0, 0, -1)
    current_loss = best_metrics["loss"].clone()  # a replica that left keeps its last loss
    batch_correct = torch.zeros(replicas, device=data.sizes.device)
    batch_count = 0
    curve = [current_loss.cpu().numpy().copy()]  # on the CPU, .numpy() shares memory
    all_fit = bool((fit_step >= 0).all())
    if cfg.leave_when_fit and not all_fit:
        _leave(active, best_metrics["accuracy"])
    step_loss = _compiled(active) if cfg.compile else _step_loss
    step = 0
    progress = tqdm(range(cfg.steps), desc=f"train {replicas} replicas", mininterval=5.0)
    for step in progress:
        # with leaving, every replica fitted means none is left to train
        if (cfg.early_stop or cfg.leave_when_fit) and all_fit:
            break
        loss, outputs, targets, weights = _forward(active, step_loss, objective, cfg)
        if loss.requires_grad:  # else the model's gradient_step has set the gradients
            loss.backward()
        if active.compute is not None:
            active.compute.push_gradients()
        active.optimizer.step(cfg.lr * lr_multiplier(step, cfg))  # torch's LambdaLR, step by step
        if step >= cfg.steps - cfg.last_batches:
            right = example_correct(outputs.detach(), targets, objective, cfg.regression_tol)
            batch_correct += (right * weights).sum(1)
            batch_count += 1
        if (step + 1) % cfg.eval_every == 0 or step + 1 == cfg.steps:
            index = active.index
            metrics = evaluate(active.model, active.data, objective, cfg.regression_tol)
            current_loss[index] = metrics["loss"]
            curve.append(current_loss.cpu().numpy().copy())
            kept = {key: value[index] for key, value in best_metrics.items()}
            improved = _improved(metrics, kept, cfg.best_by)
            _keep_best(active.model, best, improved, index)
            for key in best_metrics:
                best_metrics[key][index] = torch.where(improved, metrics[key], kept[key])
            newly_fit = (fit_step[index] < 0) & (metrics["accuracy"] >= 1.0)
            fit_step[index] = torch.where(newly_fit, step + 1, fit_step[index])
            all_fit = bool((fit_step >= 0).all())
            if cfg.leave_when_fit and not all_fit and step + 1 < cfg.steps:
                _leave(active, metrics["accuracy"])
            progress.set_postfix(fit=int((fit_step >= 0).sum()), loss=float(current_loss.mean()))
    _restore_best(model, best)
    _logger.info("trained %d replicas for %d steps", replicas, step + 1)
    batch_accuracy = (batch_correct / batch_count).cpu().numpy() if batch_count else None
    return TrainResult(
        accuracy=best_metrics["accuracy"].cpu().numpy(),
        memorized=best_metrics["memorized"].round().long().cpu().numpy(),
        loss=best_metrics["loss"].cpu().numpy(),
        kl=best_metrics["kl"].cpu().numpy(),
        fit_step=fit_step.cpu().numpy(),
        batch_accuracy=np.full(replicas, np.nan) if batch_accuracy is None else batch_accuracy,
        steps_run=step + 1,
        loss_curve=np.stack(curve),
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
