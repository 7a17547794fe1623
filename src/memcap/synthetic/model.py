"""Paper A's synthetic model, replica-batched: embedding, positions, one MHA layer, decoder.

Each example is a query token q (token 0) and n context tokens c_1..c_n, embedded linearly
(W_e, bias b_e) with a sinusoidal positional encoding p_i added: x = q W_e + o_0 and
e_i = c_i W_e + o_i, o_i = b_e + p_i. One multi-head attention layer (H heads, query/key
dimension d_h, value dimension d_v per head, output projection to d) runs under a mask that
stops every token from attending *to* token 0, so the query reads only its context, and a
linear decoder on token 0's output gives class logits or a regression value. There is no
residual connection: the query reaches the output only through its attention weights.
Tokens that are already embedded (``MHAShape.embedded``: a real model's layer inputs, which
carry their own positions) enter as they are: W_e = I, no bias and no positions, the layer
Theorem 1 analyses.

**The forward is folded.** The layer is linear before and after the softmax, so products of
weight matrices are formed once per step and applied to the raw tokens; no context token is
embedded. With M_h = W_q,h W_k,hᵀ / √d_h (/ √d for Xavier), A = [W_e; o_0] the map of the
query with a 1 appended, q̂ = [q, 1], and O = [o_1; …; o_n]:

- score of head h on position i: x M_h e_iᵀ = q̂ A M_h W_eᵀ c_iᵀ + q̂ A M_h o_iᵀ = u_h·c_i + w_hi,
  every head's u_h (d) and w_h (n) from two products of q̂ with the maps A M_h W_eᵀ and
  A M_h Oᵀ, (d + 1) × d and (d + 1) × n;
- value of head h: Σ_i a_hi e_i W_v,h = Σ_i a_hi (c_i W_e W_v,h + o_i W_v,h): every position's
  value from one product of the context rows with W_e W_v,h, plus O W_v,h;
- logits: Σ_h v_h (W_o,h W_dec) + (b_o W_dec + b_dec).

Per example: two products of q̂ (u, w), one of the n context rows with every head's u (the
scores, (n, H) for H heads), one of the rows with the value maps, the softmax and the
weighted sum over positions; gradients come from autograd. The softmax runs with the
positions as the leading axis of (n, B, H) blocks: long contiguous rows whatever H (over
(n, H) blocks it is several times slower unless H is a multiple of the vector width).

**Replicas and their heads.** Replicas may differ in H, d_h and n: parameters are drawn at
each replica's own shape (from its own seed) and zero-padded to the largest; padded context
positions get score -inf. Every replica reads its own rows. Padded weights are zero and get
gradient exactly zero (a padded head's maps and values are zero), so they stay zero.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn


@dataclass(frozen=True)
class MHAShape:
    """Shape of one replica."""

    d: int  # token (input and model) dimension
    n: int  # context size: tokens the query attends to
    H: int  # heads
    d_h: int  # query/key dimension per head
    d_v: int = 1  # value dimension per head (1 in the authors' setup)
    classes: int | None = None  # C output classes; None = scalar regression output
    xavier: bool = False  # paper A's code: Xavier-uniform weights, zero biases, scores / √d
    embedded: bool = False  # tokens already embedded (real ones): no W_e, b_e or positions

    def __post_init__(self) -> None:
        if min(self.d, self.n, self.H, self.d_h, self.d_v) < 1:
            raise ValueError(f"every dimension of {self} must be at least 1")
        if self.classes is not None and self.classes < 2:
            raise ValueError("classification needs at least 2 classes")


def sinusoidal_positions(length: int, d: int) -> Tensor:
    """(length, d) sinusoidal positional encoding of Vaswani et al. (sin on even, cos on odd)."""
    position = torch.arange(length, dtype=torch.float32)[:, None]
    frequency = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
    encoding = torch.zeros(length, d)
    encoding[:, 0::2] = torch.sin(position * frequency)
    encoding[:, 1::2] = torch.cos(position * frequency)[:, : d // 2]
    return encoding


class ReplicaMHA(nn.Module):
    """R independent copies of paper A's one-layer MHA model, trained as one batched model.

    Inputs are queries (R, B, d) and contexts (R, B, n_max, d) (or (R, 1, n_max, d): one
    context for every example); replica r reads only its first ``shapes[r].n`` context
    tokens.

    Attributes (besides the parameters):
        shapes: each replica's :class:`MHAShape`.
        max_H, max_d_h, max_n: the padded sizes.
        positions: (1 + n_max, d) sinusoidal encoding; token 0 is the query.
        score_scale: (R,) factor of the attention scores (1/√d_h, or 1/√d for Xavier).
        position_bias: (R, n_max) 0 on each replica's real context positions, -inf beyond.
        padded_context: whether any replica reads fewer than n_max context tokens.
    """

    def __init__(self, shapes: Sequence[MHAShape], seeds: Sequence[int]) -> None:
        super().__init__()
        if len(shapes) != len(seeds) or not shapes:
            raise ValueError("need one seed per replica shape, and at least one replica")
        if len({(s.d, s.d_v, s.classes, s.embedded) for s in shapes}) != 1:
            raise ValueError("replicas must share d, d_v, classes and embedded")
        self.d, self.d_v, self.classes = shapes[0].d, shapes[0].d_v, shapes[0].classes
        self.embedded = shapes[0].embedded
        self.shapes = tuple(shapes)
        self.max_H = max(s.H for s in shapes)
        self.max_d_h = max(s.d_h for s in shapes)
        self.max_n = max(s.n for s in shapes)
        params = [self._init_replica(s, seed) for s, seed in zip(shapes, seeds, strict=True)]
        for name in params[0]:
            self.register_parameter(name, nn.Parameter(torch.stack([p[name] for p in params])))
        self.register_buffer("positions", sinusoidal_positions(self.max_n + 1, self.d))
        scale = [1.0 / math.sqrt(s.d if s.xavier else s.d_h) for s in shapes]
        self.register_buffer("score_scale", torch.tensor(scale))
        beyond = torch.arange(self.max_n)[None, :] >= torch.tensor([s.n for s in shapes])[:, None]
        self.register_buffer(
            "position_bias", torch.zeros(beyond.shape).masked_fill(beyond, -math.inf)
        )
        self.padded_context = any(s.n < self.max_n for s in shapes)

    @property
    def replicas(self) -> int:
        return len(self.shapes)

    def _init_replica(self, shape: MHAShape, seed: int) -> dict[str, Tensor]:
        """nn.Linear-style (or Xavier) uniform init at the replica's own shape, zero-padded.

        Xavier bounds treat each projection as one ``nn.Linear`` over all heads (fan-out
        H·d_h for the queries), as paper A's code builds them; biases then start at zero.
        """
        g = torch.Generator().manual_seed(int(seed))
        d, h, d_h, d_v = shape.d, shape.H, shape.d_h, shape.d_v
        out = shape.classes or 1

        def uniform(fan_in: int, fan_out: int, *size: int) -> Tensor:
            if shape.xavier and len(size) == 1:
                return torch.zeros(*size)  # biases
            xavier = math.sqrt(6.0 / (fan_in + fan_out))
            bound = xavier if shape.xavier else 1.0 / math.sqrt(fan_in)
            return (torch.rand(*size, generator=g) * 2.0 - 1.0) * bound

        def pad(x: Tensor, *size: int) -> Tensor:
            padded = torch.zeros(*size)
            padded[tuple(slice(0, k) for k in x.shape)] = x
            return padded

        hm, dm = self.max_H, self.max_d_h
        embedding = {} if shape.embedded else {
            "w_embed": uniform(d, d, d, d),
            "b_embed": uniform(d, d, d),
        }  # fmt: skip
        return {
            **embedding,
            "w_query": pad(uniform(d, h * d_h, h, d, d_h), hm, d, dm),
            "w_key": pad(uniform(d, h * d_h, h, d, d_h), hm, d, dm),
            "w_value": pad(uniform(d, h * d_v, h, d, d_v), hm, d, d_v),
            "w_out": pad(uniform(h * d_v, d, h, d_v, d), hm, d_v, d),
            "b_out": uniform(h * d_v, d, d),
            "w_decode": uniform(d, out, d, out),
            "b_decode": uniform(d, out, out),
        }

    def embed(self, query: Tensor, context: Tensor) -> tuple[Tensor, Tensor]:
        """Embedded query x (R, B, d) and context e (R, B, n_max, d), positions added (the
        forward never computes them; the analysis of the trained model reads them). Embedded
        tokens are read as they are."""
        if self.embedded:
            return query, context
        n = context.shape[2]
        offsets = self.b_embed[:, None] + self.positions[: n + 1]  # (R, 1 + n, d): o_0..o_n
        x = torch.einsum("rbd,rde->rbe", query, self.w_embed) + offsets[:, None, 0]
        return x, torch.einsum("rbnd,rde->rbne", context, self.w_embed) + offsets[:, None, 1:]

    def forward(self, query: Tensor, context: Tensor) -> Tensor:
        """Logits (R, B, C), or regression values (R, B) when ``classes`` is None."""
        weights, values = self._weights(query, context)
        mixed = (weights[..., None] * values).sum(2).flatten(2)  # (R, B, H d_v): Σ_i a_hi v_hi
        w_read = torch.bmm(self.w_out.flatten(1, 2), self.w_decode)  # (R, H d_v, C): W_o W_dec
        b_read = torch.baddbmm(self.b_decode[:, None], self.b_out[:, None], self.w_decode)
        logits = torch.baddbmm(b_read, mixed, w_read)
        return logits.squeeze(-1) if self.classes is None else logits

    def attention(self, query: Tensor, context: Tensor) -> Tensor:
        """Query's attention weights over its context, (R, B, H_max, n_max); padded context
        positions get weight 0 (padded heads attend uniformly: they have no weights)."""
        return self._weights(query, context)[0].transpose(2, 3)

    def _maps(self, n: int) -> tuple[Tensor, ...]:
        """Every head's maps from q̂ to u (R, d + 1, d H) and to w (R, d + 1, n H), and from
        the context rows (R, d, H d_v) and positions (R, n, H d_v) to the values."""
        R, H, d = self.replicas, self.max_H, self.d
        o_0 = self.b_embed + self.positions[0]  # (R, d)
        offsets = self.b_embed[:, None] + self.positions[1 : n + 1]  # (R, n, d): o_1..o_n
        query_side = torch.cat([self.w_embed, o_0[:, None]], 1)  # A: (R, d + 1, d)
        query_side = query_side * self.score_scale[:, None, None]
        m = torch.matmul(self.w_query, self.w_key.mT).view(R, H * d, d)  # W_q,h W_k,hᵀ
        # M_h W_eᵀ and M_h Oᵀ, every head's rows in one product per replica, heads last
        to_u = torch.bmm(m, self.w_embed.mT).view(R, H, d, d).permute(0, 2, 3, 1)
        to_w = torch.bmm(m, offsets.mT).view(R, H, d, n).permute(0, 2, 3, 1)
        to_u = torch.bmm(query_side, to_u.reshape(R, d, d * H))  # (R, d + 1, d H)
        to_w = torch.bmm(query_side, to_w.reshape(R, d, n * H))  # (R, d + 1, n H)
        w_value = self.w_value.transpose(1, 2).flatten(2)  # (R, d, H d_v)
        from_rows = torch.bmm(self.w_embed, w_value)  # W_e W_v,h
        from_positions = torch.bmm(offsets, w_value)  # O W_v,h
        return to_u, to_w, from_rows, from_positions

    def _factors(self) -> tuple[Tensor, Tensor, Tensor]:
        """Embedded tokens: every head's W_q,h and scaled W_k,h (R, d, H, d_h) and W_v,h
        (R, d, H d_v), unfolded: at a real model's d the keys of every context row in one large
        product cost n·d·d_h an example, where the folded W_q,h W_k,hᵀ would cost d²."""
        w_query = self.w_query.transpose(1, 2)  # (R, d, H, d_h)
        w_key = (self.w_key * self.score_scale[:, None, None, None]).transpose(1, 2)
        return w_query, w_key, self.w_value.transpose(1, 2).flatten(2)  # W_v: (R, d, H d_v)

    def _weights(self, query: Tensor, context: Tensor):
        """Every head's attention weights (R, B, n, H) and values (R, B, n, H, d_v)."""
        R, B, d = query.shape
        n = context.shape[2]
        rows = context.expand(R, B, n, d).contiguous()  # a shared context: copied per example
        if self.embedded:  # score of head h on c_i: (q W_q,h)·(c_i W_k,h)
            w_query, w_key, from_rows = self._factors()
            H, k = w_query.shape[2], w_query.shape[3]
            projected = torch.bmm(query, w_query.flatten(2)).view(R, B, 1, H, k)  # q W_q,h
            keys = torch.bmm(rows.view(R, B * n, d), w_key.flatten(2)).view(R, B, n, H, k)
            scores = (keys * projected).sum(-1)  # (R, B, n, H)
        else:
            to_u, to_w, from_rows, from_positions = self._maps(n)
            H = to_w.shape[-1] // n
            q = torch.cat([query, query.new_ones(R, B, 1)], -1)  # q̂
            u = torch.bmm(q, to_u)  # (R, B, d H): u_h of every head
            w = torch.bmm(q, to_w)  # (R, B, n H): w_h of every head and position
            scores = torch.baddbmm(w.view(R * B, n, H), rows.view(R * B, n, d), u.view(R * B, d, H))
        # softmax over the positions as the leading axis of (R, n, B, H): long contiguous rows
        # (over the (n, H) blocks it runs slowly unless H is a multiple of the vector width)
        scores = scores.view(R, B, n, H).transpose(1, 2).contiguous()
        if self.padded_context:
            scores = scores + self.position_bias[:, :n, None, None]  # every head alike
        weights = torch.softmax(scores, 1).transpose(1, 2)  # (R, B, n, H)
        if self.embedded:
            values = torch.bmm(rows.view(R, B * n, d), from_rows)
        else:  # plus the positions' values O W_v,h
            per_position = from_positions[:, None].expand(R, B, n, -1).reshape(R, B * n, -1)
            values = torch.baddbmm(per_position, rows.view(R, B * n, d), from_rows)
        return weights, values.view(R, B, n, H, self.d_v)

    def select_buffers(self, index: Tensor) -> None:
        """Keep replicas ``index`` of the replica-axis buffers and shapes, in place
        (:func:`memcap.training.step.select_model` selects the parameters); padding stays."""
        self.score_scale = self.score_scale.index_select(0, index)
        self.position_bias = self.position_bias.index_select(0, index)
        self.shapes = tuple(self.shapes[i] for i in index.tolist())
        self.padded_context = any(s.n < self.max_n for s in self.shapes)
