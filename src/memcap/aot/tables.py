"""One layer's logits for every input sequence at once, from per-token tables.

With one layer the residual at position s depends only on its token, so for all N^S inputs
the queries, keys and values are computed once per token and position, and every input's
scores are gathered from N × N tables: :func:`table_logits` equals
:meth:`~memcap.aot.model.ReplicaTransformer.forward` on :func:`~memcap.aot.tasks.all_sequences`
up to float rounding (tested, padded replicas and both variants).
"""

from __future__ import annotations

import torch
from torch import Tensor

from memcap.aot.model import ReplicaTransformer, add_bias, bias_axes


def token_tables(
    model: ReplicaTransformer, w: dict[str, Tensor]
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Residual, query, key and value-output of every token at every position (one layer).

    Returns:
        x (R, S, N, D), q (R, N, H, dh) of the last position (scaled), k (R, S, N, H, dh)
        and ov = W_O (W_V x + b_V) + b_O (R, S, N, H, D).
    """
    R = w["embed"].shape[0]
    x_tab = model.embedded(w)[:, None] + w["pos"][:, :, None]  # (R, S, N, D): token n at s
    b = {n: w[n][:, 0] if n in w else None for n in ("b_q", "b_k", "b_v", "b_o")}  # (R, H, .)
    # heads last throughout: the head contraction below then reads contiguous memory
    q = torch.einsum("rhed,rnd->rnhe", w["w_q"][:, 0], x_tab[:, -1])  # (R, N, H, dh)
    q = add_bias(q, bias_axes(b["b_q"], 1)) * model.scale.view(R, 1, 1, 1)
    k = torch.einsum("rhed,rsnd->rsnhe", w["w_k"][:, 0], x_tab)  # (R, S, N, H, dh)
    k = add_bias(k, bias_axes(b["b_k"], 1, 2))
    v = torch.einsum("rhed,rsnd->rsnhe", w["w_v"][:, 0], x_tab)
    v = add_bias(v, bias_axes(b["b_v"], 1, 2))
    # attention weights sum to one, so the output bias can ride on every value
    ov = torch.einsum("rhde,rsnhe->rsnhd", w["w_o"][:, 0], v)  # (R, S, N, H, D)
    return x_tab, q, k, add_bias(ov, bias_axes(b["b_o"], 1, 2))


def table_logits(model: ReplicaTransformer, sequences: Tensor) -> Tensor:
    """Last-position logits (R, N^S, N) of every input sequence, in the order of
    ``sequences`` (N^S, S), :func:`~memcap.aot.tasks.all_sequences` (one layer only)."""
    if model.depth != 1:
        raise NotImplementedError("the token tables cover one layer; use the model's forward")
    w = model.weights()
    R, N, S = w["embed"].shape[0], model.N, model.S
    x_tab, q, k, ov = token_tables(model, w)
    H = q.shape[2]
    grid = (R,) + (N,) * S + (H,)  # one axis per input position, then heads
    # score of the key at s < S-1 depends on its token and the query token (the last one)
    cross = torch.einsum("rqhe,rsnhe->rsnqh", q, k[:, :-1])  # (R, S-1, N_key, N_q, H)
    scores = [
        cross[:, s].reshape((R,) + (1,) * s + (N,) + (1,) * (S - 2 - s) + (N, H))
        for s in range(S - 1)
    ]
    self_scores = (q * k[:, -1]).sum(-1)  # (R, N, H): the query attends to itself
    scores.append(self_scores.reshape((R,) + (1,) * (S - 1) + (N, H)))
    if S == 2:
        first = torch.sigmoid(scores[0] - scores[1])
        attn = [first, 1 - first]
    else:
        attn = torch.softmax(torch.stack([sc.expand(grid) for sc in scores]), dim=0)
    out = 0.0
    for s in range(S):
        # grid axes (prefix before s, token at s, suffix after s): contract the heads
        a = attn[s].reshape(R, N**s, N, N ** (S - 1 - s), H)
        out = out + torch.einsum("rpnqh,rnhd->rpnqd", a, ov[:, s]).reshape(R, N**S, -1)
    last = torch.index_select(x_tab[:, -1], 1, sequences[:, -1])  # (R, T0, D)
    x = last + out
    if model.has_mlp:
        x = x + model.mlp(x, w, 0)
    return model.read_out(x, w)
