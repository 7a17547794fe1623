"""A one-layer merged-heads training step, embedding to loss, as one autograd node.

The fast engine (:mod:`memcap.aot.engine`) trains a mini-batch through merged heads
(:mod:`memcap.aot.merged`). Through autograd a step of the small models here records a few
hundred nodes (views, concatenations, products of the weights) and on these sizes the
bookkeeping costs about as much as the arithmetic; here the whole step, from the token
lookup to the weighted cross-entropy, is one node whose backward is written out: the
weight-side products (A_h = W_K^T (W_Q | b_Q)/√d_h, M_h = W_O (W_V | b_V), the token table), the
attention (:func:`memcap.aot.merged.attention_backward`) and the tail
(:func:`memcap.aot.tail.tail_backward`). Same numbers as the plain model up to float
rounding (tested against autograd through the model's forward, logits and gradients).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from memcap.aot.merged import attention_backward, attention_forward
from memcap.aot.tail import TailWeights, tail_backward, tail_forward
from memcap.training.fused_loss import ExampleLoss

# The step's weights, in the order MergedStep takes them (None where the model lacks one).
NAMES = (
    "embed", "proj", "pos", "w_q", "w_k", "w_v", "w_o", "b_q", "b_v", "b_o",
    "mlp_in", "mlp_bias", "mlp_out", "mlp_out_bias", "unembed", "unembed_bias",
)  # fmt: skip
# Weights with a layer axis after the replica axis (one layer here).
_LAYERED = frozenset(NAMES[3:14])


def _with_bias(weight: Tensor, bias: Tensor | None) -> Tensor:
    """(R, H, dh, D') the weight with its bias as a last column (x̃ = (x, 1)), if any."""
    return weight if bias is None else torch.cat([weight, bias[..., None]], -1)


class MergedStep(torch.autograd.Function):
    """Per-replica weighted loss (R,) and logits (R, N, B) of tokens (R, B, S), S ≥ 2.

    Inputs: tokens; scale (R,) 1/√d_h; the loss (targets, weights, classification); N; then
    the weights in :data:`NAMES` order (masked as ``ReplicaTransformer.weights`` gives them).
    The logits carry no gradient.
    """

    @staticmethod
    def forward(
        ctx: Any, tokens: Tensor, scale: Tensor, loss: ExampleLoss, N: int, *weights: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        per_replica, logits, ctx.saved = step_forward(tokens, scale, loss, N, weights)
        ctx.mark_non_differentiable(logits)
        return per_replica, logits

    @staticmethod
    def backward(ctx: Any, grad: Tensor, _grad_logits: Tensor | None) -> tuple[Tensor | None, ...]:
        return (None, None, None, None, *step_backward(ctx.saved, grad))


def step_forward(
    tokens: Tensor, scale: Tensor, loss: ExampleLoss, N: int, weights: Sequence[Tensor | None]
) -> tuple[Tensor, Tensor, tuple]:
    """:class:`MergedStep`'s loss (R,) and logits (R, N, B), and what :func:`step_backward`
    needs (called directly, it records no autograd graph: see :mod:`memcap.aot.direct`)."""
    w = dict(zip(NAMES, weights, strict=True))
    w = {n: t[:, 0] if n in _LAYERED and t is not None else t for n, t in w.items()}
    R, B, S = tokens.shape
    embed, proj = w["embed"], w["proj"]
    emb = embed if proj is None else torch.bmm(embed, proj.transpose(1, 2))  # (R, N, D)
    D = emb.shape[-1]
    table = (emb[:, None] + w["pos"][:, :, None]).flatten(1, 2).transpose(1, 2)  # (R, D, S·N)
    cols = (tokens + torch.arange(S, device=tokens.device) * N).transpose(1, 2)
    cols = cols.reshape(R, 1, S * B).expand(-1, D, -1)
    earlier, x = torch.gather(table, 2, cols).view(R, D, S, B).split([S - 1, 1], 2)
    bias = w["b_q"] is not None
    q, v = _with_bias(w["w_q"], w["b_q"]), _with_bias(w["w_v"], w["b_v"])
    merged = torch.matmul(w["w_o"], v)  # (R, H, D, D')
    score = torch.matmul(w["w_k"].transpose(-1, -2), q) * scale.view(R, 1, 1, 1)
    out, attention = attention_forward(x.squeeze(2), earlier, score, merged, bias)
    out_bias = None if w["b_o"] is None else w["b_o"].sum(1)
    tail = TailWeights(out_bias, *(w[n] for n in NAMES[10:]))
    per_replica, logits, tail_saved = tail_forward(out, tail, loss)
    saved = (attention, tail_saved, tail, q, v, cols, w, scale, loss, (R, B, S, N, D))
    return per_replica, logits, saved


def step_backward(saved: tuple, grad: Tensor) -> list[Tensor | None]:
    """Gradients of the weights (in :data:`NAMES` order) from that of the loss (R,)."""
    attention, tail_saved, tail, q, v, cols, w, scale, loss, (R, B, S, N, D) = saved
    grad_out, grad_tail = tail_backward(tail_saved, grad, tail, loss)
    grad_x, grad_earlier, grad_score, grad_merged = attention_backward(attention, grad_out)
    grad_score = grad_score * scale.view(R, 1, 1, 1)
    grad_q = torch.matmul(w["w_k"], grad_score)  # score = W_K^T q̃
    grad_k = torch.matmul(q, grad_score.transpose(-1, -2))
    grad_o = torch.matmul(grad_merged, v.transpose(-1, -2))  # merged = W_O ṽ
    grad_v = torch.matmul(w["w_o"].transpose(-1, -2), grad_merged)
    grads: dict[str, Tensor | None] = {"w_q": grad_q, "w_k": grad_k, "w_v": grad_v}
    grads["w_o"] = grad_o
    if w["b_q"] is not None:
        grads["b_q"], grads["b_v"] = grad_q[..., D], grad_v[..., D]
        grads["w_q"], grads["w_v"] = grad_q[..., :D], grad_v[..., :D]
    if grad_tail.out_bias is not None:
        grads["b_o"] = grad_tail.out_bias[:, None].expand_as(w["b_o"])
    grads.update({f: getattr(grad_tail, f) for f in TailWeights.FIELDS})
    # the token lookup: scatter the examples' gradients back onto the table
    grad_xs = torch.cat([grad_earlier, grad_x[:, :, None]], 2).view(R, D, S * B)
    table = grad_xs.new_zeros(R, D, S * N).scatter_add_(2, cols, grad_xs).view(R, D, S, N)
    grads["pos"] = table.sum(3).transpose(1, 2)  # (R, S, D)
    grad_emb = table.sum(2).transpose(1, 2)  # (R, N, D)
    if w["proj"] is None:
        grads["embed"] = grad_emb
    else:
        grads["embed"] = torch.bmm(grad_emb, w["proj"])
        grads["proj"] = torch.bmm(grad_emb.transpose(1, 2), w["embed"])
    out = []
    for name in NAMES:
        g = grads.get(name) if w[name] is not None else None
        out.append(g[:, None] if g is not None and name in _LAYERED else g)
    return out
