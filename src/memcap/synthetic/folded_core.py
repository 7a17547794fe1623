"""The per-example part of the folded training step (:mod:`memcap.synthetic.folded`),
forward and hand-written backward.

Weights (G leading, one per input group of :mod:`~memcap.synthetic.head_slots`, whose S
heads are stacked): ``to_scores`` (d + 1, S (d + n)) maps a raw query and a 1 to every
head's (u_h, w_h); ``to_values`` (d + n, S d_v) holds W_e W_v,h over o_i W_v,h. Inputs:
queries with a 1 appended (G, B, d + 1), so one matmul adds the bias row (a broadcast bias
costs a copy as slow as the matmul), and contexts (G, B, n, d); they get no gradient.
"""

from __future__ import annotations

import torch
from torch import Tensor

Saved = tuple[Tensor, Tensor, Tensor, Tensor]


def core_forward(
    query: Tensor, context: Tensor, to_scores: Tensor, to_values: Tensor
) -> tuple[Tensor, Saved]:
    """Every head's mixed values (G, B, S d_v), and what :func:`core_backward` needs."""
    groups, batch, n, d = context.shape
    heads = to_scores.shape[-1] // (d + n)
    dv = to_values.shape[-1] // heads
    z = torch.bmm(query, to_scores)
    z = z.view(groups * batch, heads, d + n)
    rows = context.reshape(groups * batch, n, d)
    scores = torch.baddbmm(z[..., d:], z[..., :d], rows.transpose(1, 2))  # (G B, S, n)
    weights = torch.softmax(scores, -1)
    # Values of every head and context row, (G, S d_v, B n): the fast BLAS layout.
    values = torch.bmm(
        to_values[:, :d].transpose(1, 2),
        context.reshape(groups, batch * n, d).transpose(1, 2),
    )
    values = values.view(groups, heads * dv, batch, n)
    values.add_(to_values[:, d:].transpose(1, 2)[:, :, None])
    spread = _per_example(values, heads, dv)  # (G, B, S, n, d_v) view
    mixed = (weights.view(groups, batch, heads, n, 1) * spread).sum(3)
    return mixed.view(groups, batch, heads * dv), (query, context, weights, values)


def core_backward(saved: Saved, grad_mixed: Tensor) -> tuple[Tensor, Tensor]:
    """Gradients of ``to_scores`` (G, d + 1, S (d + n)) and ``to_values`` (G, d + n, S d_v)
    from that of the mixed values (G, B, S d_v)."""
    query, context, weights, values = saved
    groups, batch, n, d = context.shape
    heads = weights.shape[1]
    dv = values.shape[1] // heads
    grad_mixed = grad_mixed.reshape(groups, batch, heads, 1, dv)
    spread = _per_example(values, heads, dv)
    grad_weights = (grad_mixed * spread).sum(-1).view(groups * batch, heads, n)
    grad_values = torch.empty_like(values)  # (G, S d_v, B, n)
    torch.mul(
        weights.view(groups, batch, heads, n, 1),
        grad_mixed,
        out=_per_example(grad_values, heads, dv),
    )
    grad_values_flat = grad_values.view(groups, heads * dv, batch * n)
    grad_to_values = torch.cat(
        [
            torch.bmm(grad_values_flat, context.reshape(groups, batch * n, d)),
            grad_values.sum(2),
        ],
        -1,
    ).transpose(1, 2)
    # Weights of padded positions are 0, so their scores get gradient 0.
    grad_scores = torch._softmax_backward_data(grad_weights, weights, -1, weights.dtype)
    grad_u = torch.bmm(grad_scores, context.reshape(groups * batch, n, d))
    # Weight gradients of u and w apart, interleaved per head after: a concatenation of
    # the per-example gradients along their short last axis is slower than both matmuls.
    queries_t = query.transpose(1, 2)  # the appended 1 sums the bias row's gradient
    per_head = [
        torch.bmm(queries_t, grad_part.view(groups, batch, heads * width)).view(
            groups, d + 1, heads, width
        )
        for grad_part, width in ((grad_u, d), (grad_scores, n))
    ]
    grad_to_scores = torch.cat(per_head, -1).view(groups, d + 1, heads * (d + n))
    return grad_to_scores, grad_to_values


def _per_example(values: Tensor, heads: int, dv: int) -> Tensor:
    """(G, S d_v, B, n) values as a (G, B, S, n, d_v) view."""
    groups, _, batch, n = values.shape
    return values.view(groups, heads, dv, batch, n).permute(0, 3, 1, 4, 2)
