"""A merged-heads training step without autograd: the loss, and every parameter's gradient.

The one-node step (:class:`memcap.aot.step.MergedStep`) still runs through autograd: the
engine, one gradient accumulation per parameter and the recorded masking products of
``ReplicaTransformer.weights`` are a noticeable part of a small model's step. The fast
engine (:mod:`memcap.aot.engine`) calls the step's forward and backward directly here and
writes each parameter's gradient itself, through the masks of padded entries: the same
numbers as the autograd step.
"""

from __future__ import annotations

import torch
from torch import Tensor

from memcap.aot.model import ReplicaTransformer
from memcap.aot.step import NAMES, step_backward, step_forward
from memcap.training.fused_loss import ExampleLoss


@torch.no_grad()
def direct_step(
    model: ReplicaTransformer, tokens: Tensor, targets: Tensor, weights: Tensor
) -> tuple[Tensor, Tensor]:
    """Per-replica weighted cross-entropy (R,) and logits (R, B, N) of ``tokens`` (R, B, S);
    sets the ``grad`` of every parameter of ``model`` (that of the summed loss)."""
    w = model.weights()
    loss = ExampleLoss(targets, weights, classification=True)
    per_replica, logits, saved = step_forward(
        tokens, model.scale, loss, model.N, [w.get(name) for name in NAMES]
    )
    grads = dict(zip(NAMES, step_backward(saved, torch.ones_like(per_replica)), strict=True))
    for name, param in model.named_parameters():
        grad = grads.get(name)  # the key bias cancels in the softmax: no gradient, as autograd
        if grad is None:
            continue
        mask = model.mask(name)
        param.grad = (grad if mask is None else grad * mask).contiguous()
    return per_replica, logits.transpose(1, 2)
