"""What a replica is trained on and scored by: per-example losses and memorized examples.

:func:`example_losses` is the loss of the loop's step (autograd differentiates it).
:class:`ExampleLoss` with :func:`loss_forward` / :func:`loss_backward` is the same weighted
loss inside paper B's one-node step (:mod:`memcap.aot.step`), with its backward written out,
on logits laid out (R, C, B): cross-entropy's log-softmax over C classes runs
along the strided class axis, so every element-wise pass is vectorised over the B examples
(the CPU kernels are slower over a last axis of C = 50, the max most of all), and the
forward's softmax is kept for the backward (one exponential per logit, not two). Equal to
:func:`example_losses` weighted and summed, up to float rounding (tested).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn

Objective = Literal["classification", "regression", "distribution"]


def widened(outputs: Tensor) -> Tensor:
    """Outputs for the loss: bfloat16 / float16 in float32, float32 and float64 as they are."""
    return outputs.float() if outputs.dtype in (torch.bfloat16, torch.float16) else outputs


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


@dataclass(frozen=True)
class ExampleLoss:
    """A step's loss: Σ_b weights[r, b] · loss(output[r, b], targets[r, b]) per replica r.

    Attributes:
        targets: (R, B) class indices (classification) or values (regression).
        weights: (R, B) per-example weights.
        classification: cross-entropy on logits; otherwise the squared error of one output.
    """

    targets: Tensor
    weights: Tensor
    classification: bool


def loss_forward(logits: Tensor, loss: ExampleLoss) -> tuple[Tensor, tuple[Tensor, ...]]:
    """Per-replica loss (R,) of logits (R, C, B), and what :func:`loss_backward` needs."""
    if not loss.classification:
        error = logits[:, 0] - loss.targets
        return (error * error * loss.weights).sum(1), (error,)
    top = logits.amax(1, keepdim=True)
    picked = logits.gather(1, loss.targets[:, None]).sub_(top)
    probs = torch.sub(logits, top).exp_()
    total = probs.sum(1, keepdim=True)
    per_example = total.log().sub_(picked)  # log Σ exp - logit of the label, both shifted
    return (per_example[:, 0] * loss.weights).sum(1), (probs, total)


def loss_backward(saved: tuple[Tensor, ...], grad: Tensor, loss: ExampleLoss) -> Tensor:
    """Gradient (R, C, B) of the logits from that of the per-replica loss (R,)."""
    scale = loss.weights * grad[:, None]  # (R, B)
    if not loss.classification:
        (error,) = saved
        return (2.0 * error * scale)[:, None]
    probs, total = saved
    grad_logits = probs.mul_(scale[:, None] / total)  # softmax · scale; probs not reused
    return grad_logits.scatter_add_(1, loss.targets[:, None], -scale[:, None])
