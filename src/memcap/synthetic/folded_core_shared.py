"""The per-example part of the folded training step for a batch that reads one context.

Same interface as :mod:`memcap.synthetic.folded_core` and
:mod:`memcap.synthetic.folded_core_head_major`, for contexts (G, 1, n, ·): every example of a
group attends to the same n rows (paper A's shared context). The products with the context
then do not depend on the example and run once per step: every head's score map
P_h = [W_e; o] M_h [tokens | one-hot]ᵀ, (d + 1) × n, and every position's values; per
example only the query's scores x·P_h, the softmax and the mixing remain. A batch of B
examples costs B (d + 1) S n for its scores instead of B S (d + 1)(d + n) + B S n d, and no
context rows are gathered or augmented per example.
"""

from __future__ import annotations

import torch
from torch import Tensor

Saved = tuple[Tensor, Tensor, Tensor, Tensor]


def core_forward(
    query: Tensor,
    context: Tensor,
    tokens: Tensor,
    to_scores: Tensor,
    to_values: Tensor,
    position_mask: Tensor | None = None,
) -> tuple[Tensor, Saved]:
    """Every head's mixed values (G, B, S d_v), and what :func:`core_backward` needs;
    ``context`` (G, 1, n, d + n) and ``tokens`` (G, 1, n, d) are the one context of each
    group, ``position_mask`` (G, S, n) is added to the scores (-inf: a padded position)."""
    groups, batch = query.shape[:2]
    n, width = context.shape[2], context.shape[3]
    d = width - n
    heads = to_scores.shape[-1] // width
    dv = to_values.shape[-1] // heads
    rows = tokens[:, 0]  # (G, n, d)
    maps = to_scores.view(groups, d + 1, heads, width)  # every head's (u, w) maps
    # score of row i = u·token_i + w_i, so the map query → scores is u's map times the
    # tokens, plus w's map: (G, d + 1, S, n)
    score_maps = torch.matmul(maps[..., :d], rows.transpose(1, 2)[:, None]) + maps[..., d:]
    scores = torch.bmm(query, score_maps.reshape(groups, d + 1, heads * n))
    scores = scores.view(groups, batch, heads, n)
    if position_mask is not None:
        scores = scores + position_mask[:, None]
    weights = torch.softmax(scores, -1)  # (G, B, S, n)
    values = torch.bmm(rows, to_values[:, :d]) + to_values[:, d:]  # (G, n, S d_v)
    per_head = values.view(groups, n, heads, dv).transpose(1, 2)  # (G, S, n, d_v)
    mixed = torch.matmul(weights.transpose(1, 2), per_head)  # (G, S, B, d_v)
    return mixed.transpose(1, 2).reshape(groups, batch, heads * dv), (
        query,
        rows,
        weights,
        per_head,
    )


def core_backward(saved: Saved, grad_mixed: Tensor) -> tuple[Tensor, Tensor]:
    """Gradients of ``to_scores`` (G, d + 1, S (d + n)) and ``to_values`` (G, d + n, S d_v)
    from that of the mixed values (G, B, S d_v)."""
    query, rows, weights, per_head = saved
    groups, batch, heads, n = weights.shape
    dv = per_head.shape[-1]
    grad = grad_mixed.reshape(groups, batch, heads, dv).transpose(1, 2)  # (G, S, B, d_v)
    grad_weights = torch.matmul(grad, per_head.transpose(2, 3)).transpose(1, 2)  # (G, B, S, n)
    grad_per_head = torch.matmul(weights.permute(0, 2, 3, 1), grad)  # (G, S, n, d_v)
    grad_scores = torch._softmax_backward_data(grad_weights, weights, -1, weights.dtype)
    grad_maps = torch.bmm(query.transpose(1, 2), grad_scores.reshape(groups, batch, heads * n))
    grad_maps = grad_maps.view(groups, -1, heads, n)  # w's maps: the score maps' gradient
    grad_u = torch.matmul(grad_maps, rows[:, None])  # (G, d + 1, S, d)
    grad_to_scores = torch.cat([grad_u, grad_maps], -1).reshape(
        groups, -1, heads * (rows.shape[2] + n)
    )
    grad_values = grad_per_head.transpose(1, 2).reshape(groups, n, heads * dv)
    grad_to_values = torch.cat([torch.bmm(rows.transpose(1, 2), grad_values), grad_values], 1)
    return grad_to_scores, grad_to_values
