"""A merged-heads step after the attention: output bias, MLP, unembedding and loss, by hand.

After the attention (:mod:`memcap.aot.merged`) a mini-batch step adds the heads' output
biases, runs the GELU MLP (the MLP-Transformer), the unembedding and the weighted
cross-entropy. Here that runs in the attention's own layout (examples along the last axis):
every product is a plain ``baddbmm`` on contiguous memory, the log-softmax runs along the
strided class axis, vectorised over the examples (:mod:`memcap.training.fused_loss`), and
the backward is written out (:class:`memcap.aot.step.MergedStep` calls both).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from memcap.training.fused_loss import ExampleLoss, loss_backward, loss_forward


@dataclass(frozen=True)
class TailWeights:
    """One layer's weights after the attention, replica axis first.

    Attributes:
        out_bias: (R, D) the heads' summed output biases, or None.
        mlp_in, mlp_bias, mlp_out, mlp_out_bias: (R, w, D), (R, w), (R, D, w), (R, D); None
            without an MLP (``mlp_out_bias`` also None in the paper's variant).
        unembed: (R, N, D); unembed_bias: (R, N) or None.
    """

    out_bias: Tensor | None
    mlp_in: Tensor | None
    mlp_bias: Tensor | None
    mlp_out: Tensor | None
    mlp_out_bias: Tensor | None
    unembed: Tensor
    unembed_bias: Tensor | None

    FIELDS = ("mlp_in", "mlp_bias", "mlp_out", "mlp_out_bias", "unembed", "unembed_bias")


def _add_bias(product: Tensor, bias: Tensor | None) -> Tensor:
    return product if bias is None else product.add_(bias[..., None])


def tail_forward(
    residual: Tensor, w: TailWeights, loss: ExampleLoss
) -> tuple[Tensor, Tensor, tuple]:
    """Per-replica loss (R,), logits (R, N, B) of the residual (R, D, B), and what
    :func:`tail_backward` needs."""
    x = residual if w.out_bias is None else residual + w.out_bias[..., None]
    pre = hidden = None
    final = x
    if w.mlp_in is not None:
        pre = torch.baddbmm(w.mlp_bias[..., None], w.mlp_in, x)  # (R, w, B)
        hidden = torch.nn.functional.gelu(pre)
        final = _add_bias(torch.baddbmm(x, w.mlp_out, hidden), w.mlp_out_bias)
    logits = _add_bias(torch.bmm(w.unembed, final), w.unembed_bias)  # (R, N, B)
    per_replica, saved = loss_forward(logits, loss)
    return per_replica, logits, (x, pre, hidden, final, saved)


def tail_backward(
    saved: tuple, grad: Tensor, w: TailWeights, loss: ExampleLoss
) -> tuple[Tensor, TailWeights]:
    """Gradients of the residual (R, D, B) and of the weights from that of the loss (R,)."""
    x, pre, hidden, final, loss_saved = saved
    grad_logits = loss_backward(loss_saved, grad, loss)  # (R, N, B)
    grad_unembed = torch.bmm(grad_logits, final.transpose(1, 2))
    grad_unembed_bias = grad_logits.sum(2) if w.unembed_bias is not None else None
    grad_x = torch.bmm(w.unembed.transpose(1, 2), grad_logits)  # (R, D, B)
    grad_mlp: list[Tensor | None] = [None, None, None, None]
    if w.mlp_in is not None:
        grad_mlp_out = torch.bmm(grad_x, hidden.transpose(1, 2))  # (R, D, w)
        grad_mlp_out_bias = grad_x.sum(2) if w.mlp_out_bias is not None else None
        grad_hidden = torch.bmm(w.mlp_out.transpose(1, 2), grad_x)  # (R, w, B)
        grad_pre = torch.ops.aten.gelu_backward(grad_hidden, pre)
        grad_mlp = [torch.bmm(grad_pre, x.transpose(1, 2)), grad_pre.sum(2)]
        grad_mlp += [grad_mlp_out, grad_mlp_out_bias]
        grad_x = torch.baddbmm(grad_x, w.mlp_in.transpose(1, 2), grad_pre)
    grad_out_bias = grad_x.sum(2) if w.out_bias is not None else None
    return grad_x, TailWeights(grad_out_bias, *grad_mlp, grad_unembed, grad_unembed_bias)
