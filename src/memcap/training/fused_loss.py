"""A training loss inside a model's own one-node step (paper A's folded step,
:mod:`memcap.synthetic.folded`; paper B's, :mod:`memcap.aot.step`), forward and hand-written
backward, on logits laid out (R, C, B).

Cross-entropy's log-softmax over C classes runs along the strided class axis, so every
element-wise pass is vectorised over the B examples (the CPU kernels are slower over a last
axis of C = 50, the max most of all), the softmax of the
forward is kept for the backward (one exponential per logit, not two), and autograd runs no
graph of loss ops. Equal to :func:`memcap.training.loop.example_losses` weighted and
summed, up to float rounding.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


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
