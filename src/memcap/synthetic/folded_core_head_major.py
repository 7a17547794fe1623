"""The per-example part of the folded training step laid out head-major: scores, attention
weights and values (S, n) per example, every head's n positions contiguous.

Same interface, weights and inputs as :mod:`memcap.synthetic.folded_core` (the (n, S)
layout); :mod:`memcap.synthetic.folded` picks one by the stacked heads S. Per example,
every head's (u_h, w_h) come from one matmul of the query, its scores from one (S × d)(d × n)
product with its context rows (added onto w), and the values of every head and position
from one ((S d_v) × (d + n))((d + n) × B n) matmul per group: few heads make few long rows,
which the softmax, the mixing and their backward run over in contiguous passes, where the
(n, S) layout runs them over B n blocks of S numbers.
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
    ``tokens`` are the contexts' raw rows (G, B, n, d), contiguous, ``position_mask``
    (G, S, n) is added to the scores (-inf: a padded position)."""
    groups, batch, n, width = context.shape  # width = d + n
    heads = to_scores.shape[-1] // width
    dv = to_values.shape[-1] // heads
    z = torch.bmm(query, to_scores).view(groups * batch, heads, width)  # every head's (u, w)
    tokens = tokens.view(groups * batch, n, width - n)
    scores = torch.baddbmm(z[..., width - n :], z[..., : width - n], tokens.transpose(1, 2))
    if position_mask is not None:  # after the products: -inf times a 0 of the one-hot is NaN
        scores.view(groups, batch, heads, n).add_(position_mask[:, None])
    weights = torch.softmax(scores, -1)  # (G B, S, n)
    # Values (G, S d_v, B n) from the raw rows, the positions' terms added: the product
    # against the augmented rows, or from the transposed weights as a strided view, is
    # slower.
    to_values_t = to_values.mT.contiguous()
    values = torch.bmm(to_values_t[..., : width - n], tokens.view(groups, batch * n, -1).mT)
    values.view(groups, -1, batch, n).add_(to_values_t[:, :, None, width - n :])
    mixed = (weights.view(groups, batch, heads, n, 1) * _per_example(values, batch, heads)).sum(3)
    return mixed.view(groups, batch, heads * dv), (query, context, tokens, weights, values)


def core_backward(saved: Saved, grad_mixed: Tensor) -> tuple[Tensor, Tensor]:
    """Gradients of ``to_scores`` (G, d + 1, S (d + n)) and ``to_values`` (G, d + n, S d_v)
    from that of the mixed values (G, B, S d_v)."""
    query, context, tokens, weights, values = saved
    groups, batch, n, width = context.shape
    heads = weights.shape[1]
    dv = values.shape[1] // heads
    grad_mixed = grad_mixed.reshape(groups, batch, heads, 1, dv)
    grad_weights = (grad_mixed * _per_example(values, batch, heads)).sum(-1)  # (G, B, S, n)
    grad_values = torch.empty_like(values)  # (G, S d_v, B n), the values' layout
    torch.mul(
        weights.view(groups, batch, heads, n, 1),
        grad_mixed,
        out=_per_example(grad_values, batch, heads),
    )
    grad_to_values = torch.cat(
        [
            torch.bmm(grad_values, tokens.view(groups, batch * n, -1)),
            grad_values.view(groups, -1, batch, n).sum(2),
        ],
        -1,
    ).mT
    # Weights of padded positions are 0, so their scores get gradient 0.
    grad_scores = torch._softmax_backward_data(
        grad_weights.view(groups * batch, heads, n), weights, -1, weights.dtype
    )
    grad_u = torch.bmm(grad_scores, tokens)  # (G B, S, d)
    # u's and w's weight gradients apart, interleaved per head after: cheaper than
    # interleaving the per-example gradients.
    queries_t = query.transpose(1, 2)
    grad_to_scores = torch.cat(
        [
            torch.bmm(queries_t, grad_u.view(groups, batch, -1)).view(groups, -1, heads, width - n),
            torch.bmm(queries_t, grad_scores.view(groups, batch, -1)).view(groups, -1, heads, n),
        ],
        -1,
    )
    return grad_to_scores.view(groups, -1, heads * width), grad_to_values


def _per_example(values: Tensor, batch: int, heads: int) -> Tensor:
    """(G, S d_v, B n) values as a (G, B, S, n, d_v) view."""
    groups, rows, flat = values.shape
    return values.view(groups, heads, rows // heads, batch, flat // batch).permute(0, 3, 1, 4, 2)
