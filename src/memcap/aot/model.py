"""Replica-batched attention-only transformer (AoT) and one-head MLP-Transformer (paper B).

Two variants. ``paper`` (the paper's text): token embedding + additive positional embedding
in R^d, then ``depth`` layers of H causal attention heads (W_Q, W_K, W_V ∈ R^{d_h×d},
W_O ∈ R^{d×d_h}, added to the residual stream), optionally a GELU MLP of width w, then the
unembedding W_U ∈ R^{N×d}. ``code`` (the authors' published code): one shared linear map
d → d_h (the identity when d_h = d) feeds a residual stream in R^{d_h} with learned positions
there; every head is a one-head ``nn.MultiheadAttention`` in d_h dimensions (d_h × d_h query,
key, value and output maps with biases); the MLP and the unembedding carry biases; PyTorch's
initialisations. Both: scores scaled by 1/√d_h, causal, no LayerNorm; only the last
position's logits are read.

Replicas of different shapes (H, d_h, d, w) share one model: each replica is initialised at
its own shape and zero-padded to the largest one. Padded entries never touch the output and
get zero gradient, so Adam leaves them at zero: every path from a padded entry to the logits
runs through another padded (zero) entry. The exceptions are the output biases of padded
heads, which add to the residual directly, and the fixed identity maps d → d_h; a fixed mask
multiplies those in the forward pass. Training the padded model is training each replica
alone.

This module is the models' definition: ``forward`` (per example, any depth, causal mask) and
autograd's backward are what the reference engine trains (``engine: reference``). The fast
engine (:mod:`memcap.aot.engine`) computes the same one-layer function through token tables
(:mod:`memcap.aot.tables`) and merged heads (:mod:`memcap.aot.merged`, :mod:`memcap.aot.step`),
for this class only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import Tensor, nn

from memcap.aot.settings import Setting


class Dims(NamedTuple):
    """One replica's sizes; D is the residual dimension (d for the paper variant, d_h for
    the code variant)."""

    N: int  # vocabulary
    S: int  # sequence length
    d: int  # embedding dimension
    d_h: int  # head dimension
    H: int  # heads per layer
    L: int  # layers
    w: int  # MLP width (0: none)
    D: int  # residual dimension

    @classmethod
    def of(cls, s: Setting) -> Dims:
        residual = s.d_h if s.variant == "code" else s.d
        return cls(s.N, s.S, s.d, s.d_h, s.H, s.depth, s.width, residual)


def parameter_shapes(m: Dims) -> dict[str, tuple[int, ...]]:
    """Every parameter's shape (without the replica axis), in registration order."""
    return {
        "embed": (m.N, m.d),
        "proj": (m.d_h, m.d),
        "pos": (m.S, m.D),
        "w_q": (m.L, m.H, m.d_h, m.D),
        "w_k": (m.L, m.H, m.d_h, m.D),
        "w_v": (m.L, m.H, m.d_h, m.D),
        "w_o": (m.L, m.H, m.D, m.d_h),
        "b_q": (m.L, m.H, m.d_h),
        "b_k": (m.L, m.H, m.d_h),
        "b_v": (m.L, m.H, m.d_h),
        "b_o": (m.L, m.H, m.D),
        "mlp_in": (m.L, m.w, m.D),
        "mlp_bias": (m.L, m.w),
        "mlp_out": (m.L, m.D, m.w),
        "mlp_out_bias": (m.L, m.D),
        "unembed": (m.N, m.D),
        "unembed_bias": (m.N,),
    }


# Parameters of the code variant only.
_CODE_ONLY = ("proj", "b_q", "b_k", "b_v", "b_o", "mlp_out_bias", "unembed_bias")
# Parameters multiplied by a fixed mask (where they have one): padded entries that would
# reach the logits, and the map d -> d_h where it is the fixed identity.
MASKED = ("proj", "b_o")


def _init_replica(s: Setting, seed: int) -> dict[str, Tensor]:
    """One replica's parameters at its own shape, drawn from its own generator."""
    g = torch.Generator().manual_seed(seed)
    if s.variant == "code":
        return _init_code(s, g)
    fan_in = {"w_q": s.d, "w_k": s.d, "w_v": s.d, "w_o": s.d_h, "mlp_in": s.d, "mlp_out": s.width}
    params = {}
    for name, shape in parameter_shapes(Dims.of(s)).items():
        if name in _CODE_ONLY:
            continue
        if name == "mlp_bias":
            params[name] = torch.zeros(shape)
        else:
            # embeddings: unit variance per coordinate; matrices: variance 1 / fan-in
            std = 1.0 / math.sqrt(max(1, fan_in.get(name, s.d if name == "unembed" else 1)))
            params[name] = torch.randn(shape, generator=g) * std
    return params


def _init_code(s: Setting, g: torch.Generator) -> dict[str, Tensor]:
    """PyTorch's initialisations of the authors' modules (Embedding, Linear, MultiheadAttention)."""
    shapes = parameter_shapes(Dims.of(s))
    D, dh = Dims.of(s).D, s.d_h

    def uniform(name: str, bound: float) -> Tensor:
        return (torch.rand(shapes[name], generator=g) * 2 - 1) * bound

    params = {
        "embed": torch.randn(shapes["embed"], generator=g),
        "proj": torch.eye(dh, s.d) if dh == s.d else uniform("proj", s.d**-0.5),
        "pos": torch.randn(shapes["pos"], generator=g) * 0.02,
    }
    xavier = math.sqrt(6.0 / (dh + 3 * dh))  # in_proj_weight (3 d_h × d_h), Xavier-uniform
    for name in ("w_q", "w_k", "w_v"):
        params[name] = uniform(name, xavier)
    params["w_o"] = uniform("w_o", dh**-0.5)
    for name in ("b_q", "b_k", "b_v", "b_o"):
        params[name] = torch.zeros(shapes[name])
    params["mlp_in"] = uniform("mlp_in", D**-0.5)
    params["mlp_bias"] = uniform("mlp_bias", D**-0.5)
    params["mlp_out"] = uniform("mlp_out", max(1, s.width) ** -0.5)
    params["mlp_out_bias"] = uniform("mlp_out_bias", max(1, s.width) ** -0.5)
    params["unembed"] = uniform("unembed", D**-0.5)
    params["unembed_bias"] = uniform("unembed_bias", D**-0.5)
    return params


def _pad(x: Tensor, shape: Sequence[int]) -> Tensor:
    out = x.new_zeros(shape)
    out[tuple(slice(0, n) for n in x.shape)] = x
    return out


def add_bias(x: Tensor, bias: Tensor | None) -> Tensor:
    return x if bias is None else x + bias


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
        variants = {s.variant for s in settings}
        if len(variants) != 1:
            raise ValueError("replicas of one model must share the variant")
        self.variant = variants.pop()
        dims = Dims(*(max(column) for column in zip(*map(Dims.of, settings), strict=True)))
        self.has_mlp = dims.w > 0
        self.padded = len({s.shape_key() for s in settings}) > 1
        # the shared map d -> d_h is learned where d_h != d, fixed to the identity elsewhere
        learned_proj = [s.d_h != s.d for s in settings]
        shapes = parameter_shapes(dims)
        self.names = [
            n
            for n in shapes
            if (self.has_mlp or not n.startswith("mlp"))
            and (self.variant == "code" or n not in _CODE_ONLY)
            and (n != "proj" or any(learned_proj))
        ]
        replicas = [_init_replica(s, seed) for s, seed in zip(settings, seeds, strict=True)]
        for name in self.names:
            shape = shapes[name]
            value = torch.stack([_pad(r[name], shape) for r in replicas])
            self.register_parameter(name, nn.Parameter(value))
            if self.padded or name == "proj":
                ones = [_pad(torch.ones_like(r[name]), shape) for r in replicas]
                if name == "proj":
                    ones = [m * float(k) for m, k in zip(ones, learned_proj, strict=True)]
                self.register_buffer(f"{name}_mask", torch.stack(ones))
        if "proj" in self.names:
            fixed = [
                _pad(r["proj"], (dims.d_h, dims.d)) * float(not k)
                for r, k in zip(replicas, learned_proj, strict=True)
            ]
            self.register_buffer("proj_fixed", torch.stack(fixed))
        self.register_buffer("scale", torch.tensor([s.d_h**-0.5 for s in settings]))

    def weights(self) -> dict[str, Tensor]:
        """Every parameter with padded entries masked to zero (and the fixed identity maps)."""
        w = {name: getattr(self, name) for name in self.names}
        for name in MASKED:
            mask = self.mask(name)
            if name in w and mask is not None:
                w[name] = w[name] * mask
        if "proj" in w:
            w["proj"] = w["proj"] + self.proj_fixed
        return w

    def mask(self, name: str) -> Tensor | None:
        """The fixed mask :meth:`weights` multiplies parameter ``name`` by (None: none)."""
        if name not in MASKED or name not in self.names or not (self.padded or name == "proj"):
            return None
        return getattr(self, f"{name}_mask")

    def embedded(self, w: dict[str, Tensor]) -> Tensor:
        """(R, N, D) token embeddings in the residual stream (through the map d → d_h)."""
        if "proj" not in w:
            return w["embed"]
        return torch.einsum("rnd,red->rne", w["embed"], w["proj"])

    def forward(self, tokens: Tensor) -> Tensor:
        """Next-token logits (R, B, N) after input sequences ``tokens`` (R, B, S)."""
        return self.sequence_logits(tokens)[:, :, -1]

    def sequence_logits(self, tokens: Tensor) -> Tensor:
        """Logits (R, B, S, N) at every position, computed per example with a causal mask."""
        w = self.weights()
        R, B, S = tokens.shape
        table = self.embedded(w)  # (R, N, D)
        x = torch.gather(table, 1, tokens.reshape(R, B * S, 1).expand(-1, -1, table.shape[-1]))
        x = x.view(R, B, S, -1) + w["pos"][:, None, :S]  # (R, B, S, D)
        causal = torch.ones(S, S, dtype=torch.bool, device=tokens.device).tril()
        for layer in range(self.depth):
            b = {n: w[n][:, layer] if n in w else None for n in ("b_q", "b_k", "b_v", "b_o")}
            q = torch.einsum("rbsd,rhed->rbhse", x, w["w_q"][:, layer])  # (R, B, H, S, dh)
            q = add_bias(q, bias_axes(b["b_q"], 1, 3))
            k = torch.einsum("rbsd,rhed->rbhse", x, w["w_k"][:, layer])
            k = add_bias(k, bias_axes(b["b_k"], 1, 3))
            v = torch.einsum("rbsd,rhed->rbhse", x, w["w_v"][:, layer])
            v = add_bias(v, bias_axes(b["b_v"], 1, 3))
            scores = torch.einsum("rbhse,rbhte->rbhst", q, k) * self.scale.view(R, 1, 1, 1, 1)
            attn = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
            heads = torch.einsum("rbhst,rbhte->rbhse", attn, v)
            x = x + torch.einsum("rbhse,rhde->rbsd", heads, w["w_o"][:, layer])
            if b["b_o"] is not None:
                x = x + b["b_o"].sum(1)[:, None, None]  # every head's output bias
            if self.has_mlp:
                x = x + self.mlp(x.view(R, B * S, -1), w, layer).view(x.shape)
        return self.read_out(x.view(R, B * S, -1), w).view(R, B, S, -1)

    @staticmethod
    def mlp(x: Tensor, w: dict[str, Tensor], layer: int) -> Tensor:
        """GELU MLP on (R, T, D) residuals: batched products with the biases inside (an einsum
        records a permute, reshape and view, and their backward, around each product)."""
        hidden = torch.baddbmm(w["mlp_bias"][:, layer, None], x, w["mlp_in"][:, layer].mT)
        hidden = nn.functional.gelu(hidden)
        if "mlp_out_bias" not in w:
            return torch.bmm(hidden, w["mlp_out"][:, layer].mT)
        return torch.baddbmm(w["mlp_out_bias"][:, layer, None], hidden, w["mlp_out"][:, layer].mT)

    @staticmethod
    def read_out(x: Tensor, w: dict[str, Tensor]) -> Tensor:
        """Logits (R, T, N) of residuals (R, T, D)."""
        if "unembed_bias" not in w:
            return torch.bmm(x, w["unembed"].mT)
        return torch.baddbmm(w["unembed_bias"][:, None], x, w["unembed"].mT)


def bias_axes(bias: Tensor | None, *axes: int) -> Tensor | None:
    """A per-head bias (R, H, e) with singleton ``axes`` inserted after R, for broadcasting."""
    if bias is None:
        return None
    for axis in sorted(axes):
        bias = bias.unsqueeze(axis)
    return bias
