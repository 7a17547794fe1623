"""The training forward pass of :class:`~memcap.synthetic.model.ReplicaMHA`, weights folded.

The model is linear before and after the softmax, so products of weight matrices can be
formed once per step (they do not depend on the examples) and applied to the raw tokens:

- score of head h on context token i: ``x M_h e_iᵀ`` with ``M_h = W_q,h W_k,hᵀ`` (scaled),
  ``x = X W_e + o_0`` and ``e_i = C_i W_e + o_i`` (``o_i``: embedding bias plus position i),
  is ``u_h · C_i + w_hi`` with ``u_h = x M_h W_eᵀ`` and ``w_hi = x M_h o_iᵀ``: one matmul of
  the raw queries gives every head's ``u`` and ``w``; no context token is ever embedded;
- value of head h: ``Σ_i a_hi e_i W_v,h = Σ_i a_hi (C_i (W_e W_v,h) + o_i W_v,h)``;
- logits: ``Σ_h v_h (W_o,h W_dec) + (b_o W_dec + b_dec)``.

Per example this is one (d × H(d+n)) matmul of the query, two products with the n context
rows (scores, values; their backward two more) and one (H d_v × C) matmul. The folded
weights come from the parameters through autograd (small, example-free); the per-example
part, :class:`_FoldedCore`, has a hand-written backward with every matmul in the layout the
CPU BLAS runs fastest (measured: (H × d)(d × B n) is 7x faster than (B n × d)(d × H)).
Replicas that read identical inputs (paired data, full batches) run the per-example part
once, their real heads stacked (:mod:`memcap.synthetic.head_slots`); the readout maps every
replica's heads back. The result equals
:meth:`~memcap.synthetic.model.ReplicaMHA.reference_forward` up to float rounding (tested,
with gradients, stacked or not).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from memcap.synthetic.head_slots import HeadSlots


def folded_logits(model: nn.Module, query: Tensor, context: Tensor) -> Tensor:
    """Logits (R, B, C) (regression: (R, B, 1)) of ``model``, a ``ReplicaMHA`` (not imported:
    model.py imports this module), for queries (R, B, d) and contexts (R, B, n_max, d); the
    inputs get no gradient."""
    if query.requires_grad or context.requires_grad:
        raise ValueError("folded_logits computes no gradient for its inputs; use reference_forward")
    replicas, _, n, d = context.shape
    heads, dv = model.max_heads, model.value_dim
    w_query, w_key, w_value = model._projections()
    offsets = model.b_embed[:, None] + model.positions  # (R, 1 + n_max, d)
    # Few, batched matmuls: [W_e; o_1..o_n] is the right factor of every head's u and w
    # maps and the left factor of its values; [W_e; o_0] maps the raw query (and a 1).
    context_side = torch.cat([model.w_embed, offsets[:, 1:]], 1)  # (R, d + n, d)
    query_side = torch.cat([model.w_embed, offsets[:, :1]], 1)  # (R, d + 1, d)
    # M_h = W_q,h W_k,hᵀ, scaled: (R, H, d, d); M_h [W_eᵀ | o_iᵀ]: (R, H, d, d + n)
    m = torch.matmul(w_query, w_key.transpose(-1, -2)) * model.score_scale[:, None, None, None]
    # Heads stacked as rows: one matmul per replica (a head axis broadcast over the replicas'
    # shared factor makes torch loop over 144 tiny products, 10x slower).
    to_scores = torch.bmm(m.reshape(replicas, heads * d, d), context_side.transpose(1, 2))
    to_scores = to_scores.view(replicas, heads, d, d + n).transpose(1, 2)
    to_scores = torch.bmm(query_side, to_scores.reshape(replicas, d, heads * (d + n)))
    if model.padded_context:  # padded context positions never win attention: -inf in w
        to_scores = to_scores + model.score_mask
    w_value = w_value.permute(0, 2, 1, 3).reshape(replicas, d, heads * dv)
    to_values = torch.bmm(context_side, w_value)  # (R, d + n, H d_v)
    outputs = torch.cat([model.w_out.reshape(replicas, heads * dv, d), model.b_out[:, None]], 1)
    decode_bias = torch.nn.functional.pad(model.b_decode[:, None], (0, 0, heads * dv, 0))
    readout = torch.bmm(outputs, model.w_decode) + decode_bias  # last row: the bias
    slots, query, context = model.slot_cache.get(
        query, context, [s.heads for s in model.shapes], heads
    )
    if slots.trivial:
        mixed = _FoldedCore.apply(query, context, to_scores, to_values)
    else:
        to_scores = _to_slots(to_scores.view(replicas, d + 1, heads, d + n), slots)
        to_values = _to_slots(to_values.view(replicas, d + n, heads, dv), slots)
        mixed = _from_slots(_FoldedCore.apply(query, context, to_scores, to_values), slots, dv)
        mixed = mixed.view(-1, replicas, heads * dv).transpose(0, 1)
    return torch.baddbmm(readout[:, -1:], mixed, readout[:, :-1])


def _to_slots(weights: Tensor, slots: HeadSlots) -> Tensor:
    """Per-head folded weights (R, rows, H_max, width) → the groups' (G, rows, S · width)."""
    replicas, rows, heads, width = weights.shape
    per_head = weights.transpose(1, 2).reshape(replicas * heads, rows, width)
    stacked = per_head.index_select(0, slots.source).view(slots.groups, slots.slots, rows, width)
    return stacked.transpose(1, 2).reshape(slots.groups, rows, slots.slots * width)


def _from_slots(mixed: Tensor, slots: HeadSlots, dv: int) -> Tensor:
    """The groups' mixed values (G, B, S d_v) → every head's (B, R · H_max, d_v), padded
    heads 0."""
    batch = mixed.shape[1]
    per_slot = mixed.transpose(0, 1).reshape(batch, slots.groups * slots.slots, dv)
    return torch.nn.functional.pad(per_slot, (0, 0, 0, 1)).index_select(1, slots.target)


class _FoldedCore(torch.autograd.Function):
    """Every head's mixed values from raw tokens and folded weights; gradients for the weights
    only.

    Weights (G leading, one per input group of :mod:`~memcap.synthetic.head_slots`, whose S
    heads are stacked): to_scores (d + 1, S (d + n)) maps a raw query and a 1 to every
    head's (u_h, w_h); to_values (d + n, S d_v) holds W_e W_v,h over o_i W_v,h.
    """

    @staticmethod
    def forward(
        ctx: Any,
        query: Tensor,
        context: Tensor,
        to_scores: Tensor,
        to_values: Tensor,
    ) -> Tensor:
        replicas, batch, n, d = context.shape
        heads = to_scores.shape[-1] // (d + n)
        dv = to_values.shape[-1] // heads
        z = torch.bmm(query, to_scores[:, :d]).add_(to_scores[:, d:])
        z = z.view(replicas * batch, heads, d + n)
        rows = context.reshape(replicas * batch, n, d)
        scores = torch.baddbmm(z[..., d:], z[..., :d], rows.transpose(1, 2))  # (R B, H, n)
        weights = torch.softmax(scores, -1)
        # Values of every head and context row, (R, H d_v, B n): the fast BLAS layout.
        values = torch.bmm(
            to_values[:, :d].transpose(1, 2),
            context.reshape(replicas, batch * n, d).transpose(1, 2),
        )
        values = values.view(replicas, heads * dv, batch, n)
        values.add_(to_values[:, d:].transpose(1, 2)[:, :, None])
        spread = _per_example(values, heads, dv)  # (R, B, H, n, d_v) view
        mixed = (weights.view(replicas, batch, heads, n, 1) * spread).sum(3)
        ctx.save_for_backward(query, context, weights, values)
        return mixed.view(replicas, batch, heads * dv)

    @staticmethod
    def backward(ctx: Any, grad_mixed: Tensor) -> tuple[Tensor | None, ...]:
        query, context, weights, values = ctx.saved_tensors
        replicas, batch, n, d = context.shape
        heads = weights.shape[1]
        dv = values.shape[1] // heads
        grad_mixed = grad_mixed.reshape(replicas, batch, heads, 1, dv)
        spread = _per_example(values, heads, dv)
        grad_weights = (grad_mixed * spread).sum(-1).view(replicas * batch, heads, n)
        grad_values = torch.empty_like(values)  # (R, H d_v, B, n)
        torch.mul(
            weights.view(replicas, batch, heads, n, 1),
            grad_mixed,
            out=_per_example(grad_values, heads, dv),
        )
        grad_values_flat = grad_values.view(replicas, heads * dv, batch * n)
        grad_to_values = torch.cat(
            [
                torch.bmm(grad_values_flat, context.reshape(replicas, batch * n, d)),
                grad_values.sum(2),
            ],
            -1,
        ).transpose(1, 2)
        # Weights of padded positions are 0, so their scores get gradient 0.
        grad_scores = torch._softmax_backward_data(grad_weights, weights, -1, weights.dtype)
        grad_u = torch.bmm(grad_scores, context.reshape(replicas * batch, n, d))
        # Weight gradients of u and w apart, interleaved per head after: a concatenation of
        # the per-example gradients along their short last axis is slower than both matmuls.
        queries_t = query.transpose(1, 2)
        per_head = []
        for grad_part, width in ((grad_u, d), (grad_scores, n)):
            grad_part = grad_part.view(replicas, batch, heads * width)
            weight_grad = torch.bmm(queries_t, grad_part)
            weight_grad = torch.cat([weight_grad, grad_part.sum(1, keepdim=True)], 1)
            per_head.append(weight_grad.view(replicas, d + 1, heads, width))
        grad_to_scores = torch.cat(per_head, -1).view(replicas, d + 1, heads * (d + n))
        return None, None, grad_to_scores, grad_to_values


def _per_example(values: Tensor, heads: int, dv: int) -> Tensor:
    """(R, H d_v, B, n) values as an (R, B, H, n, d_v) view."""
    replicas, _, batch, n = values.shape
    return values.view(replicas, heads, dv, batch, n).permute(0, 3, 1, 4, 2)
