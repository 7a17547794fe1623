"""The textbook AoT forward, head by head and position by position: the tests' oracle for
:class:`memcap.aot.model.ReplicaTransformer` (merged heads)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from memcap.aot.model import ReplicaTransformer


def textbook_logits(model: ReplicaTransformer, tokens: Tensor) -> Tensor:
    """Logits (R, B, S, N) at every position of ``tokens`` (R, B, S): per head
    softmax((W_Q x + b_Q) · (W_K x + b_K) / √d_h) under a causal mask, then W_O (W_V x + b_V) +
    b_O added to the residual, the MLP, the unembedding."""
    w = model.weights()
    R, B, S = tokens.shape
    embed = w["embed"] if "proj" not in w else torch.einsum("rnd,red->rne", w["embed"], w["proj"])
    x = torch.stack([embed[r][tokens[r]] for r in range(R)]) + w["pos"][:, None, :S]
    causal = torch.ones(S, S, dtype=torch.bool, device=tokens.device).tril()
    for layer in range(model.depth):
        q, k, v = (_head_inputs(x, w, layer, n) for n in "qkv")  # (R, B, H, S, d_h)
        scores = torch.einsum("rbhse,rbhte->rbhst", q, k) * model.scale.view(R, 1, 1, 1, 1)
        attn = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
        heads = torch.einsum("rbhst,rbhte->rbhse", attn, v)
        x = x + torch.einsum("rbhse,rhde->rbsd", heads, w["w_o"][:, layer])
        if "b_o" in w:
            x = x + w["b_o"][:, layer].sum(1)[:, None, None]
        if model.has_mlp:
            hidden = torch.einsum("rbsd,rwd->rbsw", x, w["mlp_in"][:, layer])
            hidden = nn.functional.gelu(hidden + w["mlp_bias"][:, layer, None, None])
            x = x + torch.einsum("rbsw,rdw->rbsd", hidden, w["mlp_out"][:, layer])
            if "mlp_out_bias" in w:
                x = x + w["mlp_out_bias"][:, layer, None, None]
    logits = torch.einsum("rbsd,rnd->rbsn", x, w["unembed"])
    return logits if "unembed_bias" not in w else logits + w["unembed_bias"][:, None, None]


def _head_inputs(x: Tensor, w: dict[str, Tensor], layer: int, n: str) -> Tensor:
    """Every head's queries, keys or values (``n``: q, k, v) of residuals x (R, B, S, D)."""
    out = torch.einsum("rbsd,rhed->rbhse", x, w[f"w_{n}"][:, layer])
    return out if f"b_{n}" not in w else out + w[f"b_{n}"][:, None, layer, :, None]
