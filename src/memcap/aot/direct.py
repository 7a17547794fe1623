"""A merged-heads training step without autograd: the loss, and every parameter's gradient.

The one-node step (:class:`memcap.aot.step.MergedStep`) still runs through autograd: the
engine, one gradient accumulation per parameter and the recorded masking products of
``ReplicaTransformer.weights`` are a noticeable part of a small model's step. The training
loop's ``gradient_step``
hook calls the step's forward and backward directly and writes each parameter's gradient
itself, through the masks of padded entries: the same numbers as the autograd step.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from memcap.aot.step import NAMES, step_backward, step_forward
from memcap.training.fused_loss import ExampleLoss

# Parameters that ReplicaTransformer.weights multiplies by a fixed mask (where it has one).
MASKED = ("proj", "b_o")


@torch.no_grad()
def direct_step(
    model: nn.Module, tokens: Tensor, targets: Tensor, weights: Tensor
) -> tuple[Tensor, Tensor]:
    """Per-replica weighted cross-entropy (R,) and logits (R, B, N) of ``tokens`` (R, B, S);
    sets the ``grad`` of every parameter of ``model``, a
    :class:`~memcap.aot.model.ReplicaTransformer` (that of the summed loss; typed as a module
    since the model imports this one)."""
    w = model.weights()
    loss = ExampleLoss(targets, weights, classification=True)
    per_replica, logits, saved = step_forward(
        tokens, model.scale, loss, model.N, [w.get(name) for name in NAMES]
    )
    grads = dict(zip(NAMES, step_backward(saved, torch.ones_like(per_replica)), strict=True))
    for name in model.names:
        grad = grads.get(name)  # the key bias cancels in the softmax: no gradient, as autograd
        if grad is None:
            continue
        mask = getattr(model, f"{name}_mask", None) if name in MASKED else None
        param = getattr(model, name)
        param.grad = (grad if mask is None else grad * mask).contiguous()
    return per_replica, logits.transpose(1, 2)
