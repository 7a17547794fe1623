"""The rest of a merged-heads training step after the attention, with a hand-written backward.

After :class:`memcap.aot.merged.MergedAttention` a mini-batch step adds the heads' output
biases, runs the GELU MLP (the MLP-Transformer), the unembedding and the weighted
cross-entropy. Through autograd that is a dozen nodes and a transpose to the examples-first
layout; here it is one node in the attention's own layout (examples along the last axis), so
every product is a plain ``baddbmm`` on contiguous memory, the log-softmax runs along the
strided class axis, vectorised over the examples (:mod:`memcap.synthetic.folded_loss`), and
the gradient reaches the attention contiguous. Same numbers as the plain step up to float
rounding (tested against autograd through ``sequence_logits``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from memcap.synthetic.folded_loss import ExampleLoss, loss_backward, loss_forward


def _add_bias(bias: Tensor | None, product: Tensor) -> Tensor:
    return product if bias is None else product.add_(bias[..., None])


class MergedTail(torch.autograd.Function):
    """Per-replica loss (R,) and logits (R, N, B) of the attention's residual (R, D, B).

    Inputs: residual (R, D, B); out_bias (R, D) the summed output biases of the heads, or None;
    mlp: (mlp_in (R, w, D), mlp_bias (R, w), mlp_out (R, D, w), mlp_out_bias (R, D) or None),
    or None without an MLP; unembed (R, N, D); unembed_bias (R, N) or None; the loss
    (targets and weights, classification only). The logits carry no gradient.
    """

    @staticmethod
    def forward(
        ctx: Any,
        residual: Tensor,
        out_bias: Tensor | None,
        mlp_in: Tensor | None,
        mlp_bias: Tensor | None,
        mlp_out: Tensor | None,
        mlp_out_bias: Tensor | None,
        unembed: Tensor,
        unembed_bias: Tensor | None,
        loss: ExampleLoss,
    ) -> tuple[Tensor, Tensor]:
        x = residual if out_bias is None else residual + out_bias[..., None]
        pre = hidden = None
        final = x
        if mlp_in is not None:
            pre = torch.baddbmm(mlp_bias[..., None], mlp_in, x)  # (R, w, B)
            hidden = torch.nn.functional.gelu(pre)
            final = torch.baddbmm(x, mlp_out, hidden)
            final = _add_bias(mlp_out_bias, final)
        logits = _add_bias(unembed_bias, torch.bmm(unembed, final))  # (R, N, B)
        per_replica, saved = loss_forward(logits, loss)
        ctx.save_for_backward(x, pre, hidden, final, mlp_in, mlp_out, unembed, *saved)
        ctx.loss = loss
        ctx.has = (out_bias is not None, mlp_bias is not None, mlp_out_bias is not None)
        ctx.has_unembed_bias = unembed_bias is not None
        ctx.mark_non_differentiable(logits)
        return per_replica, logits

    @staticmethod
    def backward(ctx: Any, grad: Tensor, _grad_logits: Tensor | None) -> tuple[Tensor | None, ...]:
        x, pre, hidden, final, mlp_in, mlp_out, unembed, *saved = ctx.saved_tensors
        has_out_bias, has_mlp, has_mlp_out_bias = ctx.has
        grad_logits = loss_backward(tuple(saved), grad, ctx.loss)  # (R, N, B)
        grad_unembed = torch.bmm(grad_logits, final.transpose(1, 2))
        grad_unembed_bias = grad_logits.sum(2) if ctx.has_unembed_bias else None
        grad_x = torch.bmm(unembed.transpose(1, 2), grad_logits)  # (R, D, B)
        grads_mlp: tuple[Tensor | None, ...] = (None, None, None, None)
        if has_mlp:
            grad_mlp_out = torch.bmm(grad_x, hidden.transpose(1, 2))  # (R, D, w)
            grad_mlp_out_bias = grad_x.sum(2) if has_mlp_out_bias else None
            grad_hidden = torch.bmm(mlp_out.transpose(1, 2), grad_x)  # (R, w, B)
            grad_pre = torch.ops.aten.gelu_backward(grad_hidden, pre)
            grad_mlp_in = torch.bmm(grad_pre, x.transpose(1, 2))
            grads_mlp = (grad_mlp_in, grad_pre.sum(2), grad_mlp_out, grad_mlp_out_bias)
            grad_x = torch.baddbmm(grad_x, mlp_in.transpose(1, 2), grad_pre)
        grad_out_bias = grad_x.sum(2) if has_out_bias else None
        return (grad_x, grad_out_bias, *grads_mlp, grad_unembed, grad_unembed_bias, None)
