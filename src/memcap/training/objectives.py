"""What a replica is trained on and scored by: per-example losses and memorized examples.

:func:`example_losses` is the loss of the loop's step (autograd differentiates it).
"""

from __future__ import annotations

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
