"""What a training run keeps for every replica: its best state, evaluations and curves."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from memcap.training.config import BestBy


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
