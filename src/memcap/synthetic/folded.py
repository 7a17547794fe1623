"""Paper A's model (:class:`~memcap.synthetic.model.ReplicaMHA`) computed with folded weights.

The model is linear before and after the softmax, so products of weight matrices can be
formed once per step (they do not depend on the examples) and applied to the raw tokens:

- score of head h on context token i: ``x M_h e_iᵀ`` with ``M_h = W_q,h W_k,hᵀ`` (scaled),
  ``x = X W_e + o_0`` and ``e_i = C_i W_e + o_i`` (``o_i``: embedding bias plus position i),
  is ``u_h · C_i + w_hi`` with ``u_h = x M_h W_eᵀ`` and ``w_hi = x M_h o_iᵀ``: one matmul of
  the raw queries gives every head's ``u`` and ``w``; no context token is ever embedded;
- value of head h: ``Σ_i a_hi e_i W_v,h = Σ_i a_hi (C_i (W_e W_v,h) + o_i W_v,h)``;
- logits: ``Σ_h v_h (W_o,h W_dec) + (b_o W_dec + b_dec)``.

Per example this is two matmuls of the query (every head's u, every head's and position's
w), two products with the n context rows (scores, values; their backward two more) and one
(H d_v × C) matmul, laid out per example position-major (:mod:`memcap.synthetic.folded_core`)
or head-major (:mod:`memcap.synthetic.folded_core_head_major`) as :func:`core_for` picks by
the stacked heads and context size. The whole pass, parameters to
logits or to the training loss (:mod:`memcap.training.objectives`), is one autograd
function, :class:`_FoldedModel`, with a hand-written backward: autograd would otherwise run
a graph of some fifty small ops per step, whose fixed cost outweighed the arithmetic at the
default sizes. Replicas that read identical inputs (paired data, full batches) run the
per-example part once, their real heads stacked (:mod:`memcap.synthetic.head_slots`). The
result equals :meth:`~memcap.synthetic.model.ReplicaMHA.forward` up to float
rounding (tested, with gradients and the loss, stacked or not, padded or not). The fast
engine (:mod:`memcap.synthetic.engine`) trains through it.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch
from torch import Tensor

from memcap.synthetic import folded_core, folded_core_head_major, folded_core_shared
from memcap.synthetic.head_slots import HeadSlots, SlotCache
from memcap.synthetic.model import ReplicaMHA
from memcap.training.objectives import ExampleLoss, loss_backward, loss_forward


@dataclass(frozen=True)
class _Fixed:
    """What a step needs besides the parameters: buffers, masks, grouped inputs, slots."""

    positions: Tensor  # (1 + n_max, d)
    score_scale: Tensor  # (R,)
    dim_mask: Tensor | None  # (R, 1, 1, d_h max) where head dimensions are padded
    head_mask: Tensor | None  # (R, H, 1, 1) where heads are padded and not stacked away
    position_mask: Tensor | None  # (G, S, n): -inf on padded context positions' scores
    core: ModuleType  # the per-example part's layout, chosen by the stacked heads S
    slots: HeadSlots
    query: Tensor  # (G, B, d + 1): a 1 appended
    context: Tensor  # (G, B, n_max, d + n_max): one-hot positions appended
    tokens: Tensor  # (G, B, n_max, d): the raw contexts, contiguous


def folded_logits(model: ReplicaMHA, query: Tensor, context: Tensor, cache: SlotCache) -> Tensor:
    """Logits (R, B, C) (regression: (R, B, 1)) of ``model`` for queries (R, B, d) and
    contexts (R, B, n_max, d); the inputs get no gradient. ``cache`` keeps the stacked heads
    of inputs that come back (full batches)."""
    return _FoldedModel.apply(_fixed(model, query, context, cache), None, *_parameters(model))


def folded_loss(
    model: ReplicaMHA, query: Tensor, context: Tensor, loss: ExampleLoss, cache: SlotCache
) -> tuple[Tensor, Tensor]:
    """Per-replica weighted loss (R,) of ``model`` on the inputs, and its (detached) logits
    (R, B, C): the loss's forward and backward run inside the folded step."""
    fixed = _fixed(model, query, context, cache)
    per_replica, logits = _FoldedModel.apply(fixed, loss, *_parameters(model))
    return per_replica, logits


def _fixed(model: ReplicaMHA, query: Tensor, context: Tensor, cache: SlotCache) -> _Fixed:
    if query.requires_grad or context.requires_grad:
        raise ValueError("folded_logits computes no gradient for its inputs; use the model")
    slots, grouped_query, grouped_context, tokens = cache.get(
        query, context, [s.H for s in model.shapes], model.max_H
    )
    return _Fixed(
        positions=model.positions[: context.shape[2] + 1],
        score_scale=model.score_scale,
        dim_mask=model.dim_mask[:, None, None] if model.padded_head_dims else None,
        # stacked slots hold real heads only; unstacked, padded heads' values are masked
        head_mask=(
            model.head_mask[:, :, None, None] if slots.trivial and model.padded_heads else None
        ),
        position_mask=_position_mask(model, slots, context.shape[2]),
        core=folded_core_shared
        if context.shape[1] == 1
        else core_for(slots.slots, context.shape[2]),
        slots=slots,
        query=grouped_query,
        context=grouped_context,
        tokens=tokens,
    )


def _position_mask(model: ReplicaMHA, slots: HeadSlots, n: int) -> Tensor | None:
    """Additive score mask (G, S, n) of padded context positions (-inf), or None."""
    if not model.padded_context:
        return None
    mask = model.context_mask[:, :n]
    per_head = torch.zeros(mask.shape, dtype=model.positions.dtype, device=mask.device)
    per_head = per_head.masked_fill(~mask, float("-inf"))
    per_head = per_head[:, None].expand(-1, model.max_H, -1).reshape(-1, n)
    if not slots.trivial:
        per_head = per_head.index_select(0, slots.source)
    return per_head.view(slots.groups, -1, n)


def core_for(slots: int, n: int) -> ModuleType:
    """The per-example core for S = ``slots`` stacked heads per group and ``n`` (padded)
    context positions: head-major (:mod:`~memcap.synthetic.folded_core_head_major`) where
    n ≥ 16, or n ≥ 8 with S ≤ 8; position-major (:mod:`~memcap.synthetic.folded_core`)
    otherwise: the softmax and the mixing run slowly over rows of fewer than 8 positions
    head-major and over blocks of a few heads position-major. The default heads and d_h
    sweeps (n = 8, S = 21 and 24) run position-major, the context size sweep (n_max = 16,
    S = 2) head-major."""
    if n >= 16 or (n >= 8 and slots <= 8):
        return folded_core_head_major
    return folded_core


def _parameters(model: ReplicaMHA) -> tuple[Tensor, ...]:
    return tuple(getattr(model, name) for name in _PARAMETERS)


_PARAMETERS = (
    "w_embed", "b_embed", "w_query", "w_key", "w_value", "w_out", "b_out", "w_decode", "b_decode"
)  # fmt: skip


class _FoldedModel(torch.autograd.Function):
    """Parameters → logits (R, B, C), or with a ``loss`` → (per-replica loss, logits);
    gradients for every parameter (from the logits, or from the loss), none for the inputs.
    The logits are computed (R, C, B): the loss's layout (:mod:`memcap.training.objectives`)."""

    @staticmethod
    def forward(
        ctx: Any,
        fixed: _Fixed,
        loss: ExampleLoss | None,
        w_embed: Tensor,
        b_embed: Tensor,
        w_query: Tensor,
        w_key: Tensor,
        w_value: Tensor,
        w_out: Tensor,
        b_out: Tensor,
        w_decode: Tensor,
        b_decode: Tensor,
    ) -> Tensor | tuple[Tensor, Tensor]:
        replicas, heads, dv = w_value.shape[0], w_value.shape[1], w_value.shape[3]
        d = w_embed.shape[1]
        n = fixed.context.shape[2]
        if fixed.dim_mask is not None:
            w_query, w_key = w_query * fixed.dim_mask, w_key * fixed.dim_mask
        if fixed.head_mask is not None:
            w_value = w_value * fixed.head_mask
        # [W_e; o_1..o_n] is the right factor of every head's u and w maps and the left factor
        # of its values; [W_e; o_0] maps the raw query (and a 1).
        offsets = b_embed[:, None] + fixed.positions  # (R, 1 + n, d)
        context_side = torch.cat([w_embed, offsets[:, 1:]], 1)  # (R, d + n, d)
        query_side = torch.cat([w_embed, offsets[:, :1]], 1)  # (R, d + 1, d)
        m = torch.matmul(w_query, w_key.transpose(-1, -2))  # (R, H, d, d)
        m.mul_(fixed.score_scale[:, None, None, None])
        # Heads stacked as rows: one matmul per replica (a head axis broadcast over the
        # replicas' shared factor makes torch loop over many tiny products).
        right = torch.bmm(m.view(replicas, heads * d, d), context_side.transpose(1, 2))
        right = right.view(replicas, heads, d, d + n).transpose(1, 2)
        right = right.reshape(replicas, d, heads * (d + n))  # M_h [W_eᵀ | o_iᵀ], heads side by side
        to_scores = torch.bmm(query_side, right)  # (R, d + 1, H (d + n))
        value_maps = w_value.permute(0, 2, 1, 3).reshape(replicas, d, heads * dv)
        to_values = torch.bmm(context_side, value_maps)  # (R, d + n, H d_v)
        outputs = torch.cat([w_out.reshape(replicas, heads * dv, d), b_out[:, None]], 1)
        readout = torch.bmm(outputs, w_decode)  # (R, H d_v + 1, C); last row: the bias
        readout[:, -1].add_(b_decode)
        slots = fixed.slots
        if slots.trivial:
            mixed, saved = fixed.core.core_forward(
                fixed.query, fixed.context, fixed.tokens, to_scores, to_values, fixed.position_mask
            )
        else:
            grouped_scores = _to_slots(to_scores.view(replicas, d + 1, heads, d + n), slots)
            grouped_values = _to_slots(to_values.view(replicas, d + n, heads, dv), slots)
            mixed, saved = fixed.core.core_forward(
                fixed.query,
                fixed.context,
                fixed.tokens,
                grouped_scores,
                grouped_values,
                fixed.position_mask,
            )
            mixed = _from_slots(mixed, slots, dv).view(-1, replicas, heads * dv).transpose(0, 1)
        readout_t = readout.transpose(1, 2)  # (R, C, H d_v + 1)
        logits = torch.baddbmm(readout_t[:, :, -1:], readout_t[:, :, :-1], mixed.transpose(1, 2))
        ctx.fixed, ctx.saved, ctx.loss = fixed, saved, loss
        ctx.set_materialize_grads(False)  # no zero gradient for the detached logits
        ctx.save_for_backward(
            w_query, w_key, value_maps, w_decode, m, right, context_side, query_side,
            outputs, readout, mixed,
        )  # fmt: skip
        if loss is None:
            return logits.transpose(1, 2)
        per_replica, ctx.loss_saved = loss_forward(logits, loss)
        decoded = logits.transpose(1, 2)
        ctx.mark_non_differentiable(decoded)
        return per_replica, decoded

    @staticmethod
    def backward(ctx: Any, grad: Tensor, *_: Tensor) -> tuple[Tensor | None, ...]:
        fixed: _Fixed = ctx.fixed
        if grad is None:  # the outputs reached no loss
            return (None,) * (2 + len(_PARAMETERS))
        if ctx.loss is None:
            grad_logits = grad.transpose(1, 2)  # (R, C, B)
        else:
            grad_logits = loss_backward(ctx.loss_saved, grad, ctx.loss)
        (
            w_query, w_key, value_maps, w_decode, m, right, context_side, query_side,
            outputs, readout, mixed,
        ) = ctx.saved_tensors  # fmt: skip
        replicas, heads, d = m.shape[:3]
        n = context_side.shape[1] - d
        dv = value_maps.shape[2] // heads
        grad_readout = torch.cat(
            [
                torch.bmm(mixed.transpose(1, 2), grad_logits.transpose(1, 2)),
                grad_logits.sum(2)[:, None],
            ],
            1,
        )
        grad_mixed = torch.bmm(readout[:, :-1], grad_logits).transpose(1, 2)  # (R, B, H d_v)
        slots = fixed.slots
        if slots.trivial:
            grad_scores, grad_values = fixed.core.core_backward(ctx.saved, grad_mixed)
        else:
            grouped = _mixed_to_slots(grad_mixed, slots, dv)
            grad_scores, grad_values = fixed.core.core_backward(ctx.saved, grouped)
            grad_scores = _from_weight_slots(grad_scores, slots, replicas, heads, d + n)
            grad_values = _from_weight_slots(grad_values, slots, replicas, heads, dv)
        # to_scores = query_side · right
        grad_right = torch.bmm(query_side.transpose(1, 2), grad_scores)  # (R, d, H (d + n))
        grad_query_side = torch.bmm(grad_scores, right.transpose(1, 2))  # (R, d + 1, d)
        grad_right = grad_right.view(replicas, d, heads, d + n).transpose(1, 2)
        grad_right = grad_right.reshape(replicas, heads * d, d + n)
        # right_h = M_h · context_sideᵀ
        grad_m = torch.bmm(grad_right, context_side).view(replicas, heads, d, d)
        grad_context_side = torch.bmm(grad_right.transpose(1, 2), m.view(replicas, heads * d, d))
        # to_values = context_side · value_maps
        grad_context_side.baddbmm_(grad_values, value_maps.transpose(1, 2))
        grad_value_maps = torch.bmm(context_side.transpose(1, 2), grad_values)  # (R, d, H d_v)
        grad_w_value = grad_value_maps.view(replicas, d, heads, dv).permute(0, 2, 1, 3)
        if fixed.head_mask is not None:
            grad_w_value = grad_w_value * fixed.head_mask
        grad_m.mul_(fixed.score_scale[:, None, None, None])
        grad_w_query = torch.matmul(grad_m, w_key)
        grad_w_key = torch.matmul(grad_m.transpose(-1, -2), w_query)
        if fixed.dim_mask is not None:
            grad_w_query.mul_(fixed.dim_mask)
            grad_w_key.mul_(fixed.dim_mask)
        grad_w_embed = grad_context_side[:, :d] + grad_query_side[:, :d]
        grad_b_embed = grad_context_side[:, d:].sum(1) + grad_query_side[:, d]
        # readout = outputs · w_decode, plus b_decode on its last row
        grad_w_decode = torch.bmm(outputs.transpose(1, 2), grad_readout)
        grad_outputs = torch.bmm(grad_readout, w_decode.transpose(1, 2))  # (R, H d_v + 1, d)
        grad_w_out = grad_outputs[:, :-1].reshape(replicas, heads, dv, d)
        return (
            None,
            None,
            grad_w_embed,
            grad_b_embed,
            grad_w_query,
            grad_w_key,
            grad_w_value,
            grad_w_out,
            grad_outputs[:, -1],
            grad_w_decode,
            grad_readout[:, -1],
        )


def _to_slots(weights: Tensor, slots: HeadSlots) -> Tensor:
    """Per-head folded weights (R, rows, H_max, width) → the groups' (G, rows, S · width)."""
    replicas, rows, heads, width = weights.shape
    per_head = weights.transpose(1, 2).reshape(replicas * heads, rows, width)
    stacked = per_head.index_select(0, slots.source).view(slots.groups, slots.slots, rows, width)
    return stacked.transpose(1, 2).reshape(slots.groups, rows, slots.slots * width)


def _from_weight_slots(
    grad: Tensor, slots: HeadSlots, replicas: int, heads: int, width: int
) -> Tensor:
    """Backward of :func:`_to_slots`: the groups' (G, rows, S · width) gradients summed into
    every head's (R, rows, H_max · width); padded slots carry zero gradient."""
    rows = grad.shape[1]
    per_slot = grad.view(slots.groups, rows, slots.slots, width).transpose(1, 2)
    per_head = grad.new_zeros(replicas * heads, rows, width)
    per_head.index_add_(0, slots.source, per_slot.reshape(-1, rows, width))
    per_head = per_head.view(replicas, heads, rows, width).transpose(1, 2)
    return per_head.reshape(replicas, rows, heads * width)


def _from_slots(mixed: Tensor, slots: HeadSlots, dv: int) -> Tensor:
    """The groups' mixed values (G, B, S d_v) → every head's (B, R · H_max, d_v), padded
    heads 0."""
    batch = mixed.shape[1]
    per_slot = mixed.transpose(0, 1).reshape(batch, slots.groups * slots.slots, dv)
    return torch.nn.functional.pad(per_slot, (0, 0, 0, 1)).index_select(1, slots.target)


def _mixed_to_slots(grad_mixed: Tensor, slots: HeadSlots, dv: int) -> Tensor:
    """Backward of :func:`_from_slots`: every head's (R, B, H_max d_v) gradient → the
    groups' (G, B, S d_v); padded slots 0."""
    replicas, batch = grad_mixed.shape[:2]
    per_head = grad_mixed.transpose(0, 1).reshape(batch, -1, dv)
    per_slot = torch.nn.functional.pad(per_head, (0, 0, 0, 1)).index_select(1, slots.head)
    return per_slot.view(batch, slots.groups, slots.slots * dv).transpose(0, 1)
