"""The one training loop of the code base: many replicas trained at once as one batched model.

A *replica* is one independent model (one dataset size T, seed, head count ...). Every
parameter of a replica-batched model carries a leading replica axis R, and ``model(inputs)``
maps inputs of shape (R, B, ...) to outputs of shape (R, B, ...). Replica r's loss depends
only on replica r's parameters, and Adam is element-wise, so one optimizer step on the sum of
the per-replica losses performs exactly R independent Adam steps, in one batched pass.

Both papers' experiments (:mod:`memcap.synthetic`, :mod:`memcap.aot`) train through
:func:`train_replicas`, with settings from :class:`memcap.training.config.TrainConfig`.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from memcap.training.adam import FusedAdam
from memcap.training.config import TrainConfig

_logger = logging.getLogger(__name__)

Objective = Literal["classification", "regression", "distribution"]


@dataclass
class ReplicaData:
    """Training sets of R replicas, padded to a common size.

    Attributes:
        inputs: tensors of shape (R, T_max, ...) passed to the model, indexed per example.
        targets: (R, T_max) class indices or regression values, or (R, T_max, C)
            target distributions.
        sizes: (R,) number of valid examples of each replica (the first ``sizes[r]`` rows).
    """

    inputs: tuple[Tensor, ...]
    targets: Tensor
    sizes: Tensor

    @property
    def replicas(self) -> int:
        return int(self.sizes.shape[0])

    def mask(self) -> Tensor:
        """(R, T_max) True where the example is valid."""
        t_max = self.targets.shape[1]
        return torch.arange(t_max, device=self.sizes.device)[None, :] < self.sizes[:, None]

    def take(self, index: Tensor) -> tuple[tuple[Tensor, ...], Tensor]:
        """Inputs and targets at per-replica example indices ``index`` of shape (R, B)."""
        return tuple(_gather(x, index) for x in self.inputs), _gather(self.targets, index)


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


def replica_generators(seeds: Sequence[int], device: torch.device) -> list[torch.Generator]:
    """One generator per replica, so a replica's random stream does not depend on R."""
    return [torch.Generator(device=device).manual_seed(int(s)) for s in seeds]


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
        index = torch.arange(start, min(t_max, start + chunk), device=mask.device)
        index = index.expand(data.replicas, -1)
        inputs, targets = data.take(index)
        outputs = model(*inputs)
        valid = _gather(mask, index).float()
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
) -> TrainResult:
    """Train all replicas of ``model`` on ``data`` with Adam; keep each replica's best state.

    Args:
        model: replica-batched model; every parameter has leading axis R.
        data: the replicas' training sets.
        objective: loss and memorization criterion.
        cfg: optimisation settings.
        seeds: one seed per replica for its mini-batch stream.

    Returns:
        Per-replica metrics at each replica's best evaluation; the model is left holding each
        replica's best parameters.
    """
    replicas = data.replicas
    _check_replica_axis(model, replicas, len(seeds))
    device = data.sizes.device
    # PyTorch's fused Adam kernel, called directly (memcap.training.adam says why)
    optimizer = FusedAdam(model.parameters())
    batches = _batch_stream(data.sizes, cfg, replica_generators(seeds, device))
    mask = data.mask().float()
    best = {name: p.detach().clone() for name, p in model.named_parameters()}
    best_metrics = evaluate(model, data, objective, cfg.regression_tol)
    fit_step = torch.where(best_metrics["accuracy"] >= 1.0, 0, -1)
    batch_correct = torch.zeros(replicas, device=device)
    batch_count = 0
    curve = [best_metrics["loss"].cpu().numpy()]
    step = 0
    progress = tqdm(range(cfg.steps), desc=f"train {replicas} replicas", mininterval=5.0)
    for step in progress:
        if cfg.early_stop and bool((fit_step >= 0).all()):
            break
        optimizer.zero_grad()
        if cfg.batch_size is None:
            inputs, targets, weights = data.inputs, data.targets, mask / data.sizes[:, None]
        else:
            inputs, targets = data.take(next(batches))
            weights = torch.full(targets.shape[:2], 1.0 / cfg.batch_size, device=device)
        fused = getattr(model, "weighted_loss", None)  # the loss inside the model's backward
        if fused is not None:
            per_replica, outputs = fused(*inputs, targets, weights, objective)
        else:
            outputs = model(*inputs)
            per_replica = (example_losses(outputs, targets, objective) * weights).sum(1)
        per_replica.sum().backward()
        optimizer.step(cfg.lr * lr_multiplier(step, cfg))  # torch's LambdaLR, step by step
        if step >= cfg.steps - cfg.last_batches:
            right = example_correct(outputs.detach(), targets, objective, cfg.regression_tol)
            batch_correct += (right * weights).sum(1)
            batch_count += 1
        if (step + 1) % cfg.eval_every == 0 or step + 1 == cfg.steps:
            metrics = evaluate(model, data, objective, cfg.regression_tol)
            curve.append(metrics["loss"].cpu().numpy())
            improved = _improved(metrics, best_metrics, cfg.best_by)
            _keep_best(model, best, improved)
            for key in best_metrics:
                best_metrics[key] = torch.where(improved, metrics[key], best_metrics[key])
            newly_fit = (fit_step < 0) & (metrics["accuracy"] >= 1.0)
            fit_step = torch.where(newly_fit, step + 1, fit_step)
            progress.set_postfix(fit=int((fit_step >= 0).sum()), loss=float(metrics["loss"].mean()))
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


def _batch_stream(
    sizes: Tensor, cfg: TrainConfig, generators: list[torch.Generator]
) -> Iterator[Tensor]:
    """Endless (R, batch) example indices: with replacement, or shuffled epochs.

    Shuffled epochs (the authors' ``DataLoader(shuffle=True)``) cut one permutation of each
    replica's examples into size // batch batches (a remainder is dropped); replicas must share
    one size.
    """
    if cfg.batch_size is None:
        return iter(())
    if cfg.sampling == "replacement":
        return (_sample_batch(sizes, cfg.batch_size, generators) for _ in itertools.count())
    if bool((sizes != sizes[0]).any()):
        raise ValueError("shuffled epochs need replicas of one dataset size")
    return _shuffled_batches(int(sizes[0]), cfg.batch_size, generators, sizes.device)


def _shuffled_batches(
    size: int, batch: int, generators: list[torch.Generator], device: torch.device
) -> Iterator[Tensor]:
    while True:
        order = torch.stack([torch.randperm(size, generator=g, device=device) for g in generators])
        for start in range(0, size - batch + 1, batch):
            yield order[:, start : start + batch]


def _gather(x: Tensor, index: Tensor) -> Tensor:
    """Rows ``index`` (R, B) of ``x`` (R, T, ...) → (R, B, ...)."""
    expanded = index.view(*index.shape, *([1] * (x.dim() - 2))).expand(*index.shape, *x.shape[2:])
    return torch.gather(x, 1, expanded)


def _sample_batch(sizes: Tensor, batch: int, generators: list[torch.Generator]) -> Tensor:
    """(R, batch) indices drawn uniformly with replacement from each replica's own examples."""
    rows = [
        torch.randint(int(size), (batch,), generator=g, device=sizes.device)
        for size, g in zip(sizes.tolist(), generators, strict=True)
    ]
    return torch.stack(rows)


def _improved(new: dict[str, Tensor], old: dict[str, Tensor], best_by: str) -> Tensor:
    """(R,) whether the new evaluation beats the best so far (more memorized, then lower loss).

    With ``best_by = "loss"`` only the loss counts (paper A's best-loss checkpoint).
    """
    if best_by == "loss":
        return new["loss"] < old["loss"]
    more = new["memorized"] > old["memorized"]
    tie = new["memorized"] == old["memorized"]
    return more | (tie & (new["loss"] < old["loss"]))


def _keep_best(model: nn.Module, best: dict[str, Tensor], improved: Tensor) -> None:
    with torch.no_grad():
        for name, p in model.named_parameters():
            sel = improved.view(-1, *([1] * (p.dim() - 1)))
            best[name].copy_(torch.where(sel, p, best[name]))


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
