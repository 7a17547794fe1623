"""The per-example part of the folded training step (:mod:`memcap.synthetic.folded`),
forward and hand-written backward.

Weights (G leading, one per input group of :mod:`~memcap.synthetic.head_slots`, whose S
heads are stacked): ``to_scores`` (d + 1, S (d + n)) maps a raw query and a 1 to every
head's (u_h, w_h); ``to_values`` (d + n, S d_v) holds W_e W_v,h over o_i W_v,h. Inputs:
queries with a 1 appended (G, B, d + 1), so one matmul adds the bias row (a broadcast bias
costs a copy as slow as the matmul), and contexts (G, B, n, d); they get no gradient.

Layout: per example, scores, attention weights and values are (n, S) (context position
major, heads minor), so the softmax, the mixing and their backward are contiguous passes
vectorised over the heads, the values come from one (B n × d)(d × S d_v) matmul per group,
and the scores from (n × d)(d × S) per example (measured at the default sizes: 1.7x faster
than (S × d)(d × n); the mixing 2x faster than over strided head-major values).
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
    # Columns reordered to (u of every head, (S, d)) then (w of every position, (n, S)).
    per_head = to_scores.view(groups, d + 1, heads, d + n)
    reordered = torch.cat(
        [
            per_head[..., :d].reshape(groups, d + 1, heads * d),
            per_head[..., d:].transpose(2, 3).reshape(groups, d + 1, n * heads),
        ],
        -1,
    )
    z = torch.bmm(query, reordered).view(groups * batch, heads * (d + n))
    u = z[:, : heads * d].view(groups * batch, heads, d)
    rows = context.reshape(groups * batch, n, d)
    scores = torch.baddbmm(z[:, heads * d :].view(-1, n, heads), rows, u.transpose(1, 2))
    weights = torch.softmax(scores, 1)  # (G B, n, S)
    values = torch.bmm(context.reshape(groups, batch * n, d), to_values[:, :d])
    values = values.view(groups, batch, n, heads, dv)
    values.add_(to_values[:, None, d:].view(groups, 1, n, heads, dv))
    mixed = (weights.view(groups, batch, n, heads, 1) * values).sum(2)
    return mixed.view(groups, batch, heads * dv), (query, context, weights, values)


def core_backward(saved: Saved, grad_mixed: Tensor) -> tuple[Tensor, Tensor]:
    """Gradients of ``to_scores`` (G, d + 1, S (d + n)) and ``to_values`` (G, d + n, S d_v)
    from that of the mixed values (G, B, S d_v)."""
    query, context, weights, values = saved
    groups, batch, n, d = context.shape
    heads, dv = values.shape[3], values.shape[4]
    grad_mixed = grad_mixed.reshape(groups, batch, 1, heads, dv).contiguous()
    weights_5d = weights.view(groups, batch, n, heads, 1)
    grad_values = weights_5d * grad_mixed  # (G, B, n, S, d_v)
    flat_context = context.reshape(groups, batch * n, d)
    grad_to_values = torch.cat(
        [
            torch.bmm(flat_context.transpose(1, 2), grad_values.view(groups, batch * n, -1)),
            grad_values.sum(1).view(groups, n, heads * dv),
        ],
        1,
    )
    grad_weights = grad_mixed * values if dv == 1 else (grad_mixed * values).sum(-1, True)
    # Weights of padded positions are 0, so their scores get gradient 0.
    grad_scores = torch._softmax_backward_data(
        grad_weights.view(groups * batch, n, heads), weights, 1, weights.dtype
    )
    grad_u = torch.bmm(grad_scores.transpose(1, 2), context.reshape(groups * batch, n, d))
    queries_t = query.transpose(1, 2)  # the appended 1 sums the bias row's gradient
    grad_u = torch.bmm(queries_t, grad_u.view(groups, batch, heads * d))
    grad_w = torch.bmm(queries_t, grad_scores.view(groups, batch, n * heads))
    grad_to_scores = torch.cat(
        [
            grad_u.view(groups, d + 1, heads, d),
            grad_w.view(groups, d + 1, n, heads).transpose(2, 3),
        ],
        -1,
    )
    return grad_to_scores.view(groups, d + 1, heads * (d + n)), grad_to_values
