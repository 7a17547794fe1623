"""Test oracle: paper A's model as the textbook writes it, every token embedded and every head's
queries, keys and values computed, read from a :class:`ReplicaMHA`'s parameters.

Attention runs over all 1 + n tokens (query first), with token 0 masked as a key, so no
token attends to the query; the model's output is the decoder on token 0's row. Padding is
removed by slicing each replica to its own shape, so nothing here relies on the model's
zero padding or masks.
"""

from __future__ import annotations

import torch
from torch import Tensor

from memcap.synthetic.model import ReplicaMHA


def every_position(model: ReplicaMHA, r: int, query: Tensor, context: Tensor):
    """Replica ``r``'s layer output at every token (B, 1 + n, d) and attention (B, H, 1 + n,
    1 + n), for its own query (B, d) and context (B, n_max, d)."""
    s = model.shapes[r]
    tokens = torch.cat([query[:, None], context[:, : s.n]], 1)  # (B, 1 + n, d)
    embedded = tokens  # real tokens: already embedded, positions their own
    if not model.embedded:
        embedded = tokens @ model.w_embed[r] + model.b_embed[r] + model.positions[: s.n + 1]
    w_q = model.w_query[r, : s.H, :, : s.d_h]
    w_k = model.w_key[r, : s.H, :, : s.d_h]
    w_v = model.w_value[r, : s.H]
    q = torch.einsum("btd,hde->bhte", embedded, w_q)
    k = torch.einsum("btd,hde->bhte", embedded, w_k)
    v = torch.einsum("btd,hdv->bhtv", embedded, w_v)
    scores = torch.einsum("bhse,bhte->bhst", q, k) * model.score_scale[r]
    scores[..., 0] = float("-inf")  # no token attends to the query token
    attention = torch.softmax(scores, -1)
    heads = torch.einsum("bhst,bhtv->bhsv", attention, v)
    out = torch.einsum("bhsv,hvd->bsd", heads, model.w_out[r, : s.H]) + model.b_out[r]
    return out, attention


def textbook_forward(model: ReplicaMHA, query: Tensor, context: Tensor) -> Tensor:
    """The model's logits (R, B, C) (regression: (R, B)) as the textbook computes them."""
    queries, contexts = query, context.expand(-1, query.shape[1], -1, -1)
    outputs = []
    for r in range(model.replicas):
        out, _ = every_position(model, r, queries[r], contexts[r])
        outputs.append(out[:, 0] @ model.w_decode[r] + model.b_decode[r])
    logits = torch.stack(outputs)
    return logits.squeeze(-1) if model.classes is None else logits


def textbook_attention(model: ReplicaMHA, query: Tensor, context: Tensor) -> list[Tensor]:
    """Every replica's query attention over its own context, (B, H, n) each."""
    return [
        every_position(model, r, query[r], context[r])[1][:, :, 0, 1:]
        for r in range(model.replicas)
    ]
