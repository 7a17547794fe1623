"""Replica-batched attention-only transformer (AoT) and one-head MLP-Transformer (paper B).

Each replica is token embedding + additive positional embedding, then ``depth`` layers of H
causal attention heads (W_Q, W_K, W_V ∈ R^{d_h×d}, W_O ∈ R^{d×d_h}, added to the residual
stream), optionally followed by a GELU MLP of width w, then the unembedding W_U ∈ R^{N×d}.
Only the last position's logits are read.

Replicas of different shapes (H, d_h, d, w) share one model: each replica is initialised at
its own shape and zero-padded to the largest one, and a fixed mask multiplies every parameter
in the forward pass, so padded entries get zero gradient, stay zero and never touch the
output; training the padded model is training each replica alone.

Speed: with one layer the residual stream at position s depends only on the token there, so
queries, keys and values are computed once per dictionary entry (N rows instead of one per
example), attention scores are gathered from N×N tables, and the value mixing runs as batched
matrix products over the grid of all N^S inputs. :meth:`ReplicaTransformer.sequence_logits`
is the plain per-example computation (any depth, every position); the fast path matches it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from memcap.aot.settings import Setting
from memcap.aot.tasks import all_sequences, sequence_index

# Parameter name → shape as a function of one replica's (N, S, d, d_h, H, L, w).
_SHAPES = {
    "embed": lambda N, S, d, dh, H, L, w: (N, d),
    "pos": lambda N, S, d, dh, H, L, w: (S, d),
    "w_q": lambda N, S, d, dh, H, L, w: (L, H, dh, d),
    "w_k": lambda N, S, d, dh, H, L, w: (L, H, dh, d),
    "w_v": lambda N, S, d, dh, H, L, w: (L, H, dh, d),
    "w_o": lambda N, S, d, dh, H, L, w: (L, H, d, dh),
    "mlp_in": lambda N, S, d, dh, H, L, w: (L, w, d),
    "mlp_bias": lambda N, S, d, dh, H, L, w: (L, w),
    "mlp_out": lambda N, S, d, dh, H, L, w: (L, d, w),
    "unembed": lambda N, S, d, dh, H, L, w: (N, d),
}


def _init_replica(s: Setting, seed: int) -> dict[str, Tensor]:
    """One replica's parameters at its own shape, drawn from its own generator."""
    g = torch.Generator().manual_seed(seed)
    dims = (s.N, s.S, s.d, s.d_h, s.H, s.depth, s.width)
    fan_in = {"w_q": s.d, "w_k": s.d, "w_v": s.d, "w_o": s.d_h, "mlp_in": s.d, "mlp_out": s.width}
    params = {}
    for name, shape_of in _SHAPES.items():
        shape = shape_of(*dims)
        if name == "mlp_bias":
            params[name] = torch.zeros(shape)
        else:
            # embeddings: unit variance per coordinate; matrices: variance 1 / fan-in
            std = 1.0 / math.sqrt(max(1, fan_in.get(name, s.d if name == "unembed" else 1)))
            params[name] = torch.randn(shape, generator=g) * std
    return params


def _pad(x: Tensor, shape: Sequence[int]) -> Tensor:
    out = x.new_zeros(shape)
    out[tuple(slice(0, n) for n in x.shape)] = x
    return out


class ReplicaTransformer(nn.Module):
    """R replicas (AoT, or MLP-Transformer when ``width > 0``) sharing N, S and depth.

    Args:
        settings: one setting per replica; N, S and depth must agree, the rest may differ.
        seeds: one initialisation seed per replica.
    """

    def __init__(self, settings: Sequence[Setting], seeds: Sequence[int]) -> None:
        super().__init__()
        if len(settings) != len(seeds):
            raise ValueError(f"{len(settings)} settings but {len(seeds)} seeds")
        first = settings[0]
        if any((s.N, s.S, s.depth) != (first.N, first.S, first.depth) for s in settings):
            raise ValueError("replicas of one model must share N, S and depth")
        self.N, self.S, self.depth = first.N, first.S, first.depth
        self.settings = list(settings)
        dims = (
            self.N,
            self.S,
            max(s.d for s in settings),
            max(s.d_h for s in settings),
            max(s.H for s in settings),
            self.depth,
            max(s.width for s in settings),
        )
        self.has_mlp = dims[-1] > 0
        self.padded = len({s.shape_key() for s in settings}) > 1
        self.names = [n for n in _SHAPES if self.has_mlp or not n.startswith("mlp")]
        replicas = [_init_replica(s, seed) for s, seed in zip(settings, seeds, strict=True)]
        for name in self.names:
            shape = _SHAPES[name](*dims)
            value = torch.stack([_pad(r[name], shape) for r in replicas])
            self.register_parameter(name, nn.Parameter(value))
            if self.padded:
                mask = torch.stack([_pad(torch.ones_like(r[name]), shape) for r in replicas])
                self.register_buffer(f"{name}_mask", mask)
        self.register_buffer("scale", torch.tensor([s.d_h**-0.5 for s in settings]))
        self.register_buffer("sequences", all_sequences(self.N, self.S))
        self.register_buffer("_row_ids", torch.arange(self.N**self.S))

    def weights(self) -> dict[str, Tensor]:
        """Every parameter with padded entries masked to zero."""
        if not self.padded:
            return {name: getattr(self, name) for name in self.names}
        return {name: getattr(self, name) * getattr(self, f"{name}_mask") for name in self.names}

    def forward(self, tokens: Tensor) -> Tensor:
        """Next-token logits (R, B, N) after input sequences ``tokens`` (R, B, S)."""
        if self.depth > 1:
            return self.sequence_logits(tokens)[:, :, -1]
        rows = sequence_index(tokens, self.N)  # (R, B)
        table = self.all_logits()  # (R, N^S, N)
        if (
            rows.shape[1] == table.shape[1]
            and torch.equal(rows[0], self._row_ids)
            and bool((rows == rows[0]).all())
        ):
            return table  # the full data set in table order (full-batch training)
        return torch.gather(table, 1, rows[..., None].expand(-1, -1, self.N))

    def all_logits(self) -> Tensor:
        """Last-position logits (R, N^S, N) of every input sequence (one layer only)."""
        if self.depth != 1:
            raise NotImplementedError("the table path covers one layer; use sequence_logits")
        w = self.weights()
        R, N, S = self.embed.shape[0], self.N, self.S
        seq = self.sequences  # (T0, S)
        x_tab = w["embed"][:, None] + w["pos"][:, :, None]  # (R, S, N, d): token n at position s
        # heads last throughout: the head contraction below then reads contiguous memory
        q = torch.einsum("rhed,rnd->rnhe", w["w_q"][:, 0], x_tab[:, -1])  # (R, N, H, dh)
        q = q * self.scale.view(R, 1, 1, 1)
        k = torch.einsum("rhed,rsnd->rsnhe", w["w_k"][:, 0], x_tab)  # (R, S, N, H, dh)
        v = torch.einsum("rhed,rsnd->rsnhe", w["w_v"][:, 0], x_tab)
        ov = torch.einsum("rhde,rsnhe->rsnhd", w["w_o"][:, 0], v)  # (R, S, N, H, d)
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
        last = torch.index_select(x_tab[:, -1], 1, seq[:, -1])  # (R, T0, d)
        x = last + out
        if self.has_mlp:
            x = x + self._mlp(x, w, 0)
        return torch.einsum("rtd,rnd->rtn", x, w["unembed"])

    def sequence_logits(self, tokens: Tensor) -> Tensor:
        """Logits (R, B, S, N) at every position, computed per example with a causal mask."""
        w = self.weights()
        R, B, S = tokens.shape
        x = torch.gather(
            w["embed"], 1, tokens.reshape(R, B * S, 1).expand(-1, -1, w["embed"].shape[-1])
        )
        x = x.view(R, B, S, -1) + w["pos"][:, None, :S]  # (R, B, S, d)
        causal = torch.ones(S, S, dtype=torch.bool, device=tokens.device).tril()
        for layer in range(self.depth):
            q = torch.einsum("rbsd,rhed->rbhse", x, w["w_q"][:, layer])  # (R, B, H, S, dh)
            k = torch.einsum("rbsd,rhed->rbhse", x, w["w_k"][:, layer])
            v = torch.einsum("rbsd,rhed->rbhse", x, w["w_v"][:, layer])
            scores = torch.einsum("rbhse,rbhte->rbhst", q, k) * self.scale.view(R, 1, 1, 1, 1)
            attn = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
            heads = torch.einsum("rbhst,rbhte->rbhse", attn, v)
            x = x + torch.einsum("rbhse,rhde->rbsd", heads, w["w_o"][:, layer])
            if self.has_mlp:
                x = x + self._mlp(x.view(R, B * S, -1), w, layer).view(x.shape)
        return torch.einsum("rbsd,rnd->rbsn", x, w["unembed"])

    @staticmethod
    def _mlp(x: Tensor, w: dict[str, Tensor], layer: int) -> Tensor:
        """GELU MLP on (R, T, d) residuals."""
        hidden = torch.einsum("rtd,rwd->rtw", x, w["mlp_in"][:, layer])
        hidden = nn.functional.gelu(hidden + w["mlp_bias"][:, layer, None])
        return torch.einsum("rtw,rdw->rtd", hidden, w["mlp_out"][:, layer])
