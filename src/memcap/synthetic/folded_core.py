"""The per-example part of the folded training step (:mod:`memcap.synthetic.folded`),
forward and hand-written backward.

Weights (G leading, one per input group of :mod:`~memcap.synthetic.head_slots`, whose S
heads are stacked): ``to_scores`` (d + 1, S (d + n)) maps a raw query and a 1 to every
head's (u_h, w_h); ``to_values`` (d + n, S d_v) holds W_e W_v,h over o_i W_v,h. Inputs
(no gradient): queries with a 1 appended (G, B, d + 1) and contexts with each row's one-hot
position appended (G, B, n, d + n), so that matmuls add every bias term (a broadcast bias
costs a copy about as slow as the matmul): per example, u_h of every head and w_hi of every
position come from two matmuls of the query, its scores (n × S) from one product with its
context rows, added onto w, and all values from one (B n × (d + n))((d + n) × S d_v)
matmul.

Layout: scores, attention weights and values are (n, S) per example, position-major, so
the softmax, the mixing and their backward are contiguous passes vectorised over the heads
(at the heads sweep's sizes, n = 8 and S = 21, faster than over head-major values and than
scores as (S × d)(d × n) products). With few heads
or long contexts the head-major layout (:mod:`memcap.synthetic.folded_core_head_major`, same
interface) is faster; :func:`memcap.synthetic.folded.core_for` picks.
"""

from __future__ import annotations

import torch
from torch import Tensor

Saved = tuple[Tensor, Tensor, Tensor, Tensor, Tensor]


def core_forward(
    query: Tensor,
    context: Tensor,
    tokens: Tensor,
    to_scores: Tensor,
    to_values: Tensor,
    position_mask: Tensor | None = None,
) -> tuple[Tensor, Saved]:
    """Every head's mixed values (G, B, S d_v), and what :func:`core_backward` needs;
    ``tokens`` are the contexts' raw rows (G, B, n, d), contiguous (the score products read
    them), ``position_mask`` (G, S, n) is added to the scores (-inf: a padded position)."""
    groups, batch, n, width = context.shape  # width = d + n
    heads = to_scores.shape[-1] // width
    dv = to_values.shape[-1] // heads
    # u (S × d per example) and w, laid out (n, S) to be the scores' start, in two matmuls:
    # one large fresh output (2 MB at T = 256) costs more per byte than these two.
    per_head = to_scores.view(groups, -1, heads, width)
    u = torch.bmm(query, per_head[..., : width - n].reshape(groups, -1, heads * (width - n)))
    scores = torch.bmm(
        query, per_head[..., width - n :].transpose(2, 3).reshape(groups, -1, n * heads)
    )
    scores = scores.view(groups * batch, n, heads)
    tokens = tokens.view(groups * batch, n, width - n)
    scores.baddbmm_(tokens, u.view(groups * batch, heads, width - n).transpose(1, 2))
    if position_mask is not None:  # after the products: -inf times a 0 of the one-hot is NaN
        scores.view(groups, batch, n, heads).add_(position_mask.transpose(1, 2)[:, None])
    weights = torch.softmax(scores, 1)
    # (S d_v × (d + n))((d + n) × B n): a (B n × (d + n))((d + n) × S d_v) product with few
    # columns is slow in the CPU BLAS; a strided view.
    values = torch.bmm(to_values.transpose(1, 2), context.view(groups, batch * n, width).mT)
    values = values.mT.view(groups, batch, n, heads, dv)
    mixed = (weights.view(groups, batch, n, heads, 1) * values).sum(2)
    return mixed.view(groups, batch, heads * dv), (query, context, tokens, weights, values)


def core_backward(saved: Saved, grad_mixed: Tensor) -> tuple[Tensor, Tensor]:
    """Gradients of ``to_scores`` (G, d + 1, S (d + n)) and ``to_values`` (G, d + n, S d_v)
    from that of the mixed values (G, B, S d_v)."""
    query, context, tokens, weights, values = saved
    groups, batch, n, width = context.shape
    heads, dv = values.shape[3], values.shape[4]
    grad_mixed = grad_mixed.reshape(groups, batch, 1, heads, dv).contiguous()
    grad_values = weights.view(groups, batch, n, heads, 1) * grad_mixed  # (G, B, n, S, d_v)
    # transposed, as in the forward: (d + n) rows against B n are slow in the CPU BLAS
    flat_grad_values = grad_values.view(groups, batch * n, heads * dv)
    grad_to_values = torch.bmm(flat_grad_values.mT, context.view(groups, batch * n, width)).mT
    grad_weights = grad_mixed * values if dv == 1 else (grad_mixed * values).sum(-1, True)
    # Weights of padded positions are 0, so their scores get gradient 0.
    grad_scores = torch._softmax_backward_data(
        grad_weights.view(groups * batch, n, heads), weights, 1, weights.dtype
    )
    grad_u = torch.bmm(grad_scores.transpose(1, 2), tokens)  # (G B, S, d)
    queries_t = query.transpose(1, 2)
    grad_to_scores = torch.cat(
        [
            torch.bmm(queries_t, grad_u.view(groups, batch, -1)).view(groups, -1, heads, width - n),
            torch.bmm(queries_t, grad_scores.view(groups, batch, -1))
            .view(groups, -1, n, heads)
            .transpose(2, 3),
        ],
        -1,
    )
    return grad_to_scores.view(groups, -1, heads * width), grad_to_values
