"""Paper A's synthetic model, replica-batched: embedding, positions, one MHA layer, decoder.

Each example is a query token x (token 0) and n context tokens e_1..e_n. Tokens are embedded
linearly, a sinusoidal positional encoding is added, and one multi-head attention layer (H
heads, query/key dimension d_h, value dimension d_v per head, output projection to d) runs
under a mask that stops every token from attending *to* token 0, so the query reads only its
context. A linear decoder on token 0's output gives class logits or a regression value. There
is no residual connection: the query reaches the output only through its attention weights.

Replicas may differ in H, d_h and n: parameters are drawn at each replica's own shape (from
its own seed, so a replica does not depend on its neighbours) and zero-padded to the largest
shape; masks keep padded heads, head dimensions and context positions out of the computation,
and their gradients are exactly zero.

This module is the model's definition: its ``forward`` and autograd's backward are what the
reference engine trains (``engine: reference``). The fast engine
(:mod:`memcap.synthetic.engine`) computes the same function through folded weights, for this
class only; a subclass that changes the model trains through the reference.
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
    value_dim: int = 1  # d_v per head (1 in the authors' setup)
    classes: int | None = None  # C output classes; None = scalar regression output
    xavier: bool = False  # paper A's code: Xavier-uniform weights, zero biases, scores / √d

    def __post_init__(self) -> None:
        if min(self.d, self.n, self.H, self.d_h, self.value_dim) < 1:
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

    Inputs are queries (R, B, d) and contexts (R, B, n_max, d); replica r reads only its first
    ``shapes[r].n`` context tokens.

    Attributes (besides the parameters):
        shapes: each replica's :class:`MHAShape`.
        max_H, max_d_h, max_n: the padded sizes.
        positions: (1 + n_max, d) sinusoidal encoding; token 0 is the query.
        score_scale: (R,) factor of the attention scores (1/√d_h, or 1/√d for Xavier).
        head_mask, dim_mask: (R, H_max), (R, d_h max) ones on each replica's real heads and
            head dimensions; context_mask: (R, n_max) True on its real context positions.
        padded_heads, padded_head_dims, padded_context: whether any replica is padded there.
    """

    def __init__(self, shapes: Sequence[MHAShape], seeds: Sequence[int]) -> None:
        super().__init__()
        if len(shapes) != len(seeds) or not shapes:
            raise ValueError("need one seed per replica shape, and at least one replica")
        first = shapes[0]
        common = {(s.d, s.value_dim, s.classes) for s in shapes}
        if len(common) != 1:
            raise ValueError("replicas must share d, value_dim and classes")
        self.d, self.value_dim, self.classes = first.d, first.value_dim, first.classes
        self.shapes = tuple(shapes)
        self.max_H = max(s.H for s in shapes)
        self.max_d_h = max(s.d_h for s in shapes)
        self.max_n = max(s.n for s in shapes)
        params = [self._init_replica(s, seed) for s, seed in zip(shapes, seeds, strict=True)]
        for name in params[0]:
            self.register_parameter(name, nn.Parameter(torch.stack([p[name] for p in params])))
        self.register_buffer("positions", sinusoidal_positions(self.max_n + 1, self.d))
        self.register_buffer("head_mask", self._mask([s.H for s in shapes], self.max_H))
        self.register_buffer("dim_mask", self._mask([s.d_h for s in shapes], self.max_d_h))
        self.register_buffer("context_mask", self._mask([s.n for s in shapes], self.max_n).bool())
        self.padded_context = any(s.n < self.max_n for s in shapes)
        self.padded_heads = len({s.H for s in shapes}) > 1
        self.padded_head_dims = len({s.d_h for s in shapes}) > 1
        self.register_buffer(
            "score_scale",
            torch.tensor([1.0 / math.sqrt(s.d if s.xavier else s.d_h) for s in shapes]),
        )

    @property
    def replicas(self) -> int:
        return len(self.shapes)

    def _init_replica(self, shape: MHAShape, seed: int) -> dict[str, Tensor]:
        """nn.Linear-style (or Xavier) uniform init at the replica's own shape, zero-padded.

        Xavier bounds treat each projection as one ``nn.Linear`` over all heads (fan-out
        H·d_h for the queries), as paper A's code builds them; biases then start at zero.
        """
        g = torch.Generator().manual_seed(int(seed))
        d, h, dh, dv = shape.d, shape.H, shape.d_h, shape.value_dim
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
        return {
            "w_embed": uniform(d, d, d, d),
            "b_embed": uniform(d, d, d),
            "w_query": pad(uniform(d, h * dh, h, d, dh), hm, d, dm),
            "w_key": pad(uniform(d, h * dh, h, d, dh), hm, d, dm),
            "w_value": pad(uniform(d, h * dv, h, d, dv), hm, d, dv),
            "w_out": pad(uniform(h * dv, d, h, dv, d), hm, dv, d),
            "b_out": uniform(h * dv, d, d),
            "w_decode": uniform(d, out, d, out),
            "b_decode": uniform(d, out, out),
        }

    @staticmethod
    def _mask(sizes: Sequence[int], size: int) -> Tensor:
        return (torch.arange(size)[None, :] < torch.tensor(sizes)[:, None]).float()

    def embed(self, query: Tensor, context: Tensor) -> tuple[Tensor, Tensor]:
        """Embedded query (R, B, d) and context (R, B, n_max, d), positions added."""
        replicas, batch, n, d = context.shape
        offset = self.b_embed[:, None] + self.positions  # (R, 1 + n_max, d): one add per token
        x = torch.bmm(query, self.w_embed) + offset[:, None, 0]
        # bmm on (R, B·n, d) keeps the output contiguous; broadcasting the offset onto a
        # permuted einsum output is the slowest op of a training step on the CPU.
        e = torch.bmm(context.reshape(replicas, batch * n, d), self.w_embed)
        return x, e.view(replicas, batch, n, d) + offset[:, None, 1:]

    def _projections(self) -> tuple[Tensor, Tensor, Tensor]:
        """Query, key and value weights, padded head dimensions and heads masked (a mask of
        ones is skipped: each multiplication costs a small op forward and backward)."""
        w_query, w_key, w_value = self.w_query, self.w_key, self.w_value
        if self.padded_head_dims:
            dims = self.dim_mask[:, None, None, :]
            w_query, w_key = w_query * dims, w_key * dims
        if self.padded_heads:
            w_value = w_value * self.head_mask[:, :, None, None]
        return w_query, w_key, w_value

    def _attend(self, query: Tensor, context: Tensor) -> tuple[Tensor, Tensor]:
        """The query's attention (R, B, H, n_max) and embedded context (R, B, n_max, d)."""
        x, e = self.embed(query, context)
        w_query, w_key, _ = self._projections()
        q = torch.einsum("rbd,rhde->rbhe", x, w_query)  # (R, B, H, dh)
        # W_k q: scores e_i·(W_k q) without computing keys for every token and head.
        qk = torch.einsum("rbhe,rhde->rbhd", q, w_key)  # (R, B, H, d)
        scores = torch.einsum("rbhd,rbnd->rbhn", qk, e) * self.score_scale[:, None, None, None]
        scores = scores.masked_fill(~self.context_mask[:, None, None, :], float("-inf"))
        return _softmax(scores), e

    def attention(self, query: Tensor, context: Tensor) -> Tensor:
        """Query's attention weights over its context, (R, B, H_max, n_max).

        Padded heads (``head_mask`` 0) attend uniformly and are to be ignored; padded context
        positions get weight 0.
        """
        return self._attend(query, context)[0]

    def layer_output(self, query: Tensor, context: Tensor) -> Tensor:
        """The MHA layer's output at the query token, (R, B, d)."""
        attn, e = self._attend(query, context)
        _, _, w_value = self._projections()
        mixed = torch.einsum("rbhn,rbnd->rbhd", attn, e)  # (R, B, H, d)
        values = torch.einsum("rbhd,rhdv->rbhv", mixed, w_value)  # (R, B, H, dv)
        return torch.einsum("rbhv,rhvd->rbd", values, self.w_out) + self.b_out[:, None]

    def forward(self, query: Tensor, context: Tensor) -> Tensor:
        """Logits (R, B, C), or regression values (R, B) when ``classes`` is None."""
        out = self.layer_output(query, context)
        decoded = torch.einsum("rbd,rdc->rbc", out, self.w_decode) + self.b_decode[:, None]
        return decoded.squeeze(-1) if self.classes is None else decoded

    def select_replicas(self, index: Tensor) -> None:
        """Keep replicas ``index`` of the replica-axis buffers and shapes, in place (the
        training loop selects the parameters when replicas leave). Every buffer but the
        positional encoding has the replica axis; padding stays as it was."""
        for name, buffer in self.named_buffers():
            if name != "positions":
                setattr(self, name, buffer.index_select(0, index))
        self.shapes = tuple(self.shapes[i] for i in index.tolist())


def _softmax(scores: Tensor) -> Tensor:
    """Softmax over the last axis; -inf entries get weight 0 (each row needs one finite entry).

    Written out because torch.softmax is slower on the CPU, forward and backward, for rows
    as short as a context; the result is the same.
    """
    z = torch.exp(scores - scores.amax(-1, keepdim=True).detach())
    return z / z.sum(-1, keepdim=True)
