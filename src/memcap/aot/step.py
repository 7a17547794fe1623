"""A one-layer merged-heads training step, embedding to loss, as one node with its backward.

The fast engine (:mod:`memcap.aot.engine`) trains a classification mini-batch through merged
heads (:mod:`memcap.aot.merged`). Through autograd a step of the small models here records a
few hundred nodes (views, concatenations, products of the weights) and on these sizes the
bookkeeping costs about as much as the arithmetic; here the whole step, from the token
lookup to the weighted cross-entropy, is one node whose backward is written out, in three
parts: the weight-side products (A_h = W_K^T (W_Q | b_Q)/√d_h, M_h = W_O (W_V | b_V), the
token table); the attention (:func:`attention_forward` / :func:`attention_backward`: head h
scores an earlier position s by δ_s^T A_h x̃, x̃ = (x, 1), δ_s = x_s − x, and the heads add
Σ_h M_h x̃ + Σ_s Σ_h a_sh M_h δ_s to the residual); and the tail (:func:`tail_forward` /
:func:`tail_backward`: the heads' output biases, the GELU MLP, the unembedding and the loss of
:mod:`memcap.training.objectives`). Examples run along the last axis throughout, so every
element-wise product sweeps contiguous memory and every product is a plain ``bmm``. Same
numbers as the plain model up to float rounding (tested against autograd through the model's
forward: logits and gradients; the attention's backward also against finite differences).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from memcap.training.objectives import ExampleLoss, loss_backward, loss_forward

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
    needs (called directly, it records no autograd graph: :func:`memcap.aot.engine.direct_step`)."""
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


def attention_forward(
    x: Tensor, earlier: Tensor, score: Tensor, merged: Tensor, bias: bool
) -> tuple[Tensor, tuple[Tensor, ...]]:
    """The attention's output x + Σ_h M_h x̃ + Σ_s Σ_h a_sh M_h[:, :D] δ_s (R, D, B) and what
    :func:`attention_backward` needs.

    x (R, D, B) is the query's residual; earlier (R, D, S-1, B) the residuals of the earlier
    positions; score (R, H, D, D') the A_h; merged (R, H, D, D') the M_h; ``bias``: whether
    D' = D + 1 (x̃ = (x, 1)) or D' = D (x̃ = x).

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
