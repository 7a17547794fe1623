"""Logits of one layer through merged head matrices (evaluations, and steps through autograd).

:func:`merged_logits` reduces every head h of a one-layer
:class:`~memcap.aot.model.ReplicaTransformer` to two matrices (A_h scores, M_h mixes values)
and every example to its query's residual x (with a constant 1 where the model has biases:
x̃) and the differences δ_s = x_s − x of the earlier positions. Head h scores position s by
δ_s^T A_h x̃ (the query's own score is 0) and the heads add Σ_h M_h x̃ + Σ_s Σ_h a_sh M_h δ_s
to the residual. The attention is one autograd node (:class:`MergedAttention`) whose forward
and backward are :mod:`memcap.aot.step`'s, the one-node step's own.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from memcap.aot.model import ReplicaTransformer
from memcap.aot.step import attention_backward, attention_forward


def merged_logits(model: ReplicaTransformer, tokens: Tensor) -> Tensor:
    """Last-position logits (R, B, N) of ``tokens`` (R, B, S), through merged head matrices.

    One layer. With x the last residual, x̃ = (x, 1) and δ_s = x_s − x, head h scores
    position s above the last one by δ_s^T A_h x̃ (A_h = W_K^T (W_Q | b_Q) / √d_h: the key
    bias cancels in the softmax), and the heads add Σ_h M_h x̃ + Σ_h b_O + Σ_s Σ_h a_sh
    M_h δ_s to the residual (M_h = W_O (W_V | b_V)). The paper's variant has no biases and
    no constant coordinate.
    """
    w = model.weights()
    out = _merged_residual(model, tokens, w)
    if "b_o" in w:
        out = out + w["b_o"].squeeze(1).sum(1)[..., None]
    out = out.transpose(1, 2)  # (R, B, D)
    if model.has_mlp:
        out = out + model.mlp(out, w, 0)
    return model.read_out(out, w)


def _merged_residual(model: ReplicaTransformer, tokens: Tensor, w: dict[str, Tensor]) -> Tensor:
    """The last position's residual (R, D, B) after the heads, without their output biases."""
    if model.depth != 1:
        raise NotImplementedError("the merged heads cover one layer; use the model's forward")
    R, B, S = tokens.shape
    table = model.embedded(w)[:, None] + w["pos"][:, :, None]  # (R, S, N, D)
    table = table.flatten(1, 2).transpose(1, 2)  # (R, D, S·N): column n + s·N
    D = table.shape[1]
    cols = (tokens + torch.arange(S, device=tokens.device) * model.N).transpose(1, 2)
    xs = torch.gather(table, 2, cols.reshape(R, 1, S * B).expand(-1, D, -1))
    earlier, x = xs.view(R, D, S, B).split([S - 1, 1], 2)  # examples last
    x = x.squeeze(2)  # (R, D, B): the query's residual
    q, k, v, o = (w[n].squeeze(1) for n in ("w_q", "w_k", "w_v", "w_o"))  # (R, H, ., .)
    bias = "b_q" in w  # the biases ride on a constant last coordinate of x
    if bias:
        q = torch.cat([q, w["b_q"].squeeze(1)[..., None]], -1)  # (R, H, dh, D+1)
        v = torch.cat([v, w["b_v"].squeeze(1)[..., None]], -1)
    merged = torch.matmul(o, v)  # (R, H, D, D')
    if S > 1:
        score = torch.matmul(k.transpose(-1, -2), q) * model.scale.view(R, 1, 1, 1)
        return MergedAttention.apply(x, earlier, score, merged, bias)
    x_one = torch.cat([x, x.new_ones(R, 1, B)], 1) if bias else x
    return torch.baddbmm(x, merged.sum(1), x_one)  # x + Σ_h M_h x̃


class MergedAttention(torch.autograd.Function):
    """x + Σ_h M_h x̃ + Σ_s Σ_h a_sh M_h[:, :D] δ_s (R, D, B) and its gradients.

    Inputs: x (R, D, B) the query's residual; earlier (R, D, S-1, B) the residuals of the
    earlier positions; score (R, H, D, D') the A_h; merged (R, H, D, D') the M_h; ``bias``:
    whether D' = D + 1 (x̃ = (x, 1)) or D' = D (x̃ = x).
    """

    @staticmethod
    def forward(
        ctx: Any, x: Tensor, earlier: Tensor, score: Tensor, merged: Tensor, bias: bool
    ) -> Tensor:
        out, saved = attention_forward(x, earlier, score, merged, bias)
        ctx.save_for_backward(*saved)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        # it arrives transposed (examples along the middle axis)
        return (*attention_backward(ctx.saved_tensors, grad.contiguous()), None)
