"""The attention of one layer through merged head matrices, with a hand-written backward.

:func:`merged_logits` reduces every head h of a one-layer
:class:`~memcap.aot.model.ReplicaTransformer` to two
matrices (A_h scores, M_h mixes values) and every example to its query's residual x (with a
constant 1 where the model has biases: x̃) and the differences δ_s = x_s − x of the earlier
positions. Head h scores position s by δ_s^T A_h x̃ (the query's own score is 0) and the heads
add Σ_h M_h x̃ + Σ_s Σ_h a_sh M_h δ_s to the residual.

Autograd through those few products records about as many bookkeeping nodes (views, expands,
transposes) as arithmetic ones, and on small models a step costs mostly that bookkeeping. The
backward here is written out: the same products, transposed, over the same per-example
tensors, and the forward keeps only what the backward reads. Examples run along the last
axis throughout, so every element-wise product sweeps contiguous memory.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from memcap.aot.model import ReplicaTransformer


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


def attention_forward(
    x: Tensor, earlier: Tensor, score: Tensor, merged: Tensor, bias: bool
) -> tuple[Tensor, tuple[Tensor, ...]]:
    """:class:`MergedAttention`'s output and what :func:`attention_backward` needs.

    Per example the merged form sweeps D × D' numbers per earlier position (δ ⊗ x̃ and the
    mixed matrix Σ_h a_h M_h) whatever H; with fewer heads than D' (the MLP-Transformer's
    one head) the per-head form (:func:`_per_head_forward`) sweeps H × D instead.
    """
    R, D, S1, B = earlier.shape
    x_one = torch.cat([x, x.new_ones(R, 1, B)], 1) if bias else x  # (R, D', B)
    delta = earlier - x[:, :, None]  # (R, D, S-1, B)
    if score.shape[1] < score.shape[-1]:
        return _per_head_forward(x, x_one, delta, score, merged)
    pairs = (delta[:, :, None] * x_one[:, None, :, None]).reshape(R, -1, S1 * B)  # δ ⊗ x̃
    above = torch.bmm(score.flatten(2), pairs)  # (R, H, (S-1)·B)
    attn = _attention(above, S1)
    heads = merged[..., :D].flatten(2)  # (R, H, D·D)
    mix = torch.bmm(heads.transpose(1, 2), attn).view(R, D, D, S1, B)
    total = merged.sum(1)  # (R, D, D')
    out = torch.baddbmm(x, total, x_one) + (mix * delta[:, None]).sum((2, 3))
    return out, (x_one, delta, pairs, attn, mix, score, heads, total)


def attention_backward(saved: tuple[Tensor, ...], grad: Tensor) -> tuple[Tensor, ...]:
    """Gradients of x, earlier, score and merged from that of the output (R, D, B)."""
    if len(saved) == 7:
        return _per_head_backward(saved, grad)
    x_one, delta, pairs, attn, mix, score, heads, total = saved
    R, D, S1, B = delta.shape
    H = attn.shape[1]
    # the mixing: out_i += Σ_js mix_ijs δ_js with mix = Σ_h a_h M_h
    grad_delta = (mix * grad[:, :, None, None]).sum(1)  # (R, D, S-1, B)
    grad_pairs_out = (grad[:, :, None, None] * delta[:, None]).reshape(R, D * D, S1 * B)
    grad_attn = torch.bmm(heads, grad_pairs_out)  # (R, H, (S-1)·B)
    grad_heads = torch.bmm(attn, grad_pairs_out.transpose(1, 2)).view(R, H, D, D)
    grad_above = _attention_backward(attn, grad_attn, S1)
    # the scores: above_h = A_h : (δ ⊗ x̃)
    grad_score = torch.bmm(grad_above, pairs.transpose(1, 2)).view(score.shape)
    grad_pairs = torch.bmm(score.flatten(2).transpose(1, 2), grad_above)
    grad_pairs = grad_pairs.view(R, D, -1, S1, B)  # (R, D, D', S-1, B)
    grad_delta = grad_delta + (grad_pairs * x_one[:, None, :, None]).sum(2)
    grad_x_one = (grad_pairs * delta[:, :, None]).sum((1, 3))  # (R, D', B)
    # the linear part: x + Σ_h M_h x̃
    grad_x_one = torch.baddbmm(grad_x_one, total.transpose(1, 2), grad)
    grad_merged = torch.bmm(grad, x_one.transpose(1, 2))[:, None].repeat(1, H, 1, 1)
    grad_merged[..., :D] += grad_heads
    grad_x = grad + grad_x_one[:, :D] - grad_delta.sum(2)
    return grad_x, grad_delta, grad_score, grad_merged


def _per_head_forward(
    x: Tensor, x_one: Tensor, delta: Tensor, score: Tensor, merged: Tensor
) -> tuple[Tensor, tuple[Tensor, ...]]:
    """The attention head by head: above_hs = δ_s · (A_h x̃), out += Σ_hs a_hs (M_h δ_s)."""
    R, D, S1, B = delta.shape
    H = score.shape[1]
    query = torch.bmm(score.view(R, H * D, -1), x_one).view(R, H, D, 1, B)  # A_h x̃
    above = (query * delta[:, None]).sum(2)  # (R, H, S-1, B)
    attn = _attention(above.view(R, H, S1 * B), S1).view(R, H, 1, S1, B)
    heads = merged[..., :D].reshape(R, H * D, D)
    values = torch.bmm(heads, delta.view(R, D, S1 * B)).view(R, H, D, S1, B)  # M_h δ_s
    total = merged.sum(1)  # (R, D, D')
    out = torch.baddbmm(x, total, x_one) + (attn * values).sum((1, 3))
    return out, (x_one, delta, query, attn, values, score, merged)


def _per_head_backward(saved: tuple[Tensor, ...], grad: Tensor) -> tuple[Tensor, ...]:
    """:func:`attention_backward` of :func:`_per_head_forward`."""
    x_one, delta, query, attn, values, score, merged = saved
    R, D, S1, B = delta.shape
    H = score.shape[1]
    grad_col = grad[:, None, :, None]  # (R, 1, D, 1, B)
    grad_attn = (values * grad_col).sum(2)  # (R, H, S-1, B)
    grad_values = (attn * grad_col).view(R, H * D, S1 * B)
    grad_heads = torch.bmm(grad_values, delta.view(R, D, S1 * B).transpose(1, 2))
    grad_delta = torch.bmm(merged[..., :D].reshape(R, H * D, D).transpose(1, 2), grad_values)
    grad_above = _attention_backward(attn.view(R, H, -1), grad_attn.view(R, H, -1), S1)
    grad_above = grad_above.view(R, H, 1, S1, B)
    grad_query = (grad_above * delta[:, None]).sum(3).view(R, H * D, B)
    grad_delta = grad_delta.view(R, D, S1, B) + (grad_above * query).sum(1)
    grad_score = torch.bmm(grad_query, x_one.transpose(1, 2)).view(score.shape)
    grad_x_one = torch.bmm(score.view(R, H * D, -1).transpose(1, 2), grad_query)
    # the linear part: x + Σ_h M_h x̃
    grad_x_one = torch.baddbmm(grad_x_one, merged.sum(1).transpose(1, 2), grad)
    grad_merged = torch.bmm(grad, x_one.transpose(1, 2))[:, None].repeat(1, H, 1, 1)
    grad_merged[..., :D] += grad_heads.view(R, H, D, D)
    grad_x = grad + grad_x_one[:, :D] - grad_delta.sum(2)
    return grad_x, grad_delta, grad_score, grad_merged


def _attention(above: Tensor, S1: int) -> Tensor:
    """Weights (R, H, (S-1)·B) of the earlier positions: a softmax with the query's own 0."""
    if S1 == 1:
        return torch.sigmoid(above)  # the softmax of (above, 0)
    R, H, B = above.shape[0], above.shape[1], above.shape[2] // S1
    above = above.view(R, H, S1, B)
    attn = torch.softmax(torch.cat([above, above.new_zeros(R, H, 1, B)], 2), 2)
    return attn[:, :, :-1].reshape(R, H, S1 * B)


def _attention_backward(attn: Tensor, grad_attn: Tensor, S1: int) -> Tensor:
    """Gradient of the earlier positions' scores: a_s (g_s − Σ_t a_t g_t), the query's g = 0."""
    if S1 == 1:
        return grad_attn * attn * (1 - attn)
    R, H = attn.shape[:2]
    a = attn.view(R, H, S1, -1)
    weighted = a * grad_attn.view(a.shape)
    return (weighted - a * weighted.sum(2, keepdim=True)).view(attn.shape)
