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

The heads are computed merged. With x_t the residual of the query position t, x̃ = (x, 1)
where the model has biases (x̃ = x without), and q_t, k_s, v_s a head's query, key and value,

    q_t · k_s / √d_h = x_s^T A_h x̃_t + b_K · q_t / √d_h,   A_h = W_K^T (W_Q | b_Q) / √d_h,
    W_O v_s + b_O   = M_h x̃_s + b_O,                     M_h = W_O (W_V | b_V),

both D × D' (D the residual's dimension). The second score term does not depend on s, so the
softmax drops it, and so the query's own score x_t^T A_h x̃_t: head h scores an earlier
position s by δ_s^T A_h x̃_t with δ_s = x_s − x_t, the query itself by 0. The weights a_sh
sum to one and δ's constant coordinate is 0, so the layer adds

    Σ_h M_h x̃_t + Σ_h b_O + Σ_{s<t} (Σ_h a_sh M_h[:, :D]) δ_s

to the residual (b_O rides on the constant column of Σ_h M_h where x̃ has one): per example
and earlier position, one product of the heads' A_h (H × D·D') with the pairs δ_s ⊗ x̃_t and
one of the mixed matrix Σ_h a_sh M_h (D·D × H) with δ_s, both swept with the examples along
the last axis (tensors (R, D, ..., B)). Autograd differentiates it. The per-head textbook
forward is the tests' oracle (``tests/helpers/aot_oracle.py``).

Replicas of different shapes (H, d_h, d, w) share one model: each replica is initialised at
its own shape and zero-padded to the largest one. Padded entries never touch the output and
get zero gradient, so Adam leaves them at zero: every path from a padded entry to the logits
runs through another padded (zero) entry. The exceptions are the output biases of padded
heads, which add to the residual directly, and the fixed identity maps d → d_h; a fixed mask
multiplies those in the forward pass. Training the padded model is training each replica
alone.

The model trains through :class:`AoTStep`: :class:`memcap.training.step.AutogradStep`
(``torch.compile`` with ``cfg.compile``) with one change: the cross-entropy reads the logits
as the model computes them, classes along the middle axis (R, N, B), so its passes run along
the examples instead of along a last axis of N classes (the logits are not copied into
(R·B, N) rows). The same loss as :func:`memcap.training.data.example_losses` up to float
rounding (tested).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import Tensor, nn

from memcap.aot.settings import Setting
from memcap.training.data import Objective, widened
from memcap.training.step import AutogradStep


class Dims(NamedTuple):
    """One replica's sizes; d_res is the residual stream's dimension (d for the paper variant,
    d_h for the code variant)."""

    N: int  # vocabulary
    S: int  # sequence length
    d: int  # embedding dimension
    d_h: int  # head dimension
    H: int  # heads per layer
    L: int  # layers
    w: int  # MLP width (0: none)
    d_res: int  # residual dimension

    @classmethod
    def of(cls, s: Setting) -> Dims:
        residual = s.d_h if s.variant == "code" else s.d
        return cls(s.N, s.S, s.d, s.d_h, s.H, s.depth, s.width, residual)


def parameter_shapes(m: Dims) -> dict[str, tuple[int, ...]]:
    """Every parameter's shape (without the replica axis), in registration order."""
    return {
        "embed": (m.N, m.d),
        "proj": (m.d_h, m.d),
        "pos": (m.S, m.d_res),
        "w_q": (m.L, m.H, m.d_h, m.d_res),
        "w_k": (m.L, m.H, m.d_h, m.d_res),
        "w_v": (m.L, m.H, m.d_h, m.d_res),
        "w_o": (m.L, m.H, m.d_res, m.d_h),
        "b_q": (m.L, m.H, m.d_h),
        "b_k": (m.L, m.H, m.d_h),
        "b_v": (m.L, m.H, m.d_h),
        "b_o": (m.L, m.H, m.d_res),
        "mlp_in": (m.L, m.w, m.d_res),
        "mlp_bias": (m.L, m.w),
        "mlp_out": (m.L, m.d_res, m.w),
        "mlp_out_bias": (m.L, m.d_res),
        "unembed": (m.N, m.d_res),
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
    d_res, d_h = Dims.of(s).d_res, s.d_h

    def uniform(name: str, bound: float) -> Tensor:
        return (torch.rand(shapes[name], generator=g) * 2 - 1) * bound

    params = {
        "embed": torch.randn(shapes["embed"], generator=g),
        "proj": torch.eye(d_h, s.d) if d_h == s.d else uniform("proj", s.d**-0.5),
        "pos": torch.randn(shapes["pos"], generator=g) * 0.02,
    }
    xavier = math.sqrt(6.0 / (d_h + 3 * d_h))  # in_proj_weight (3 d_h × d_h), Xavier-uniform
    for name in ("w_q", "w_k", "w_v"):
        params[name] = uniform(name, xavier)
    params["w_o"] = uniform("w_o", d_h**-0.5)
    for name in ("b_q", "b_k", "b_v", "b_o"):
        params[name] = torch.zeros(shapes[name])
    params["mlp_in"] = uniform("mlp_in", d_res**-0.5)
    params["mlp_bias"] = uniform("mlp_bias", d_res**-0.5)
    params["mlp_out"] = uniform("mlp_out", max(1, s.width) ** -0.5)
    params["mlp_out_bias"] = uniform("mlp_out_bias", max(1, s.width) ** -0.5)
    params["unembed"] = uniform("unembed", d_res**-0.5)
    params["unembed_bias"] = uniform("unembed_bias", d_res**-0.5)
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

    def forward(self, tokens: Tensor) -> Tensor:
        """Next-token logits (R, B, N) after input sequences ``tokens`` (R, B, S)."""
        w = self.weights()
        layer_heads = list(zip(*(m.unbind(1) for m in self.merged_heads(w)), strict=True))
        x = self.residuals(tokens, w)  # (R, D, S, B)
        for layer in range(self.depth - 1):  # every position attends to its prefix
            x = torch.stack(
                [self.attend(x[:, :, : t + 1], *layer_heads[layer]) for t in range(self.S)], 2
            )
            if self.has_mlp:
                x = self.mlp(x.flatten(2), w, layer).view(x.shape)
        x = self.attend(x, *layer_heads[-1])  # (R, D, B): the last position only
        if self.has_mlp:
            x = self.mlp(x, w, self.depth - 1)
        return self.read_out(x, w).transpose(1, 2)

    def residuals(self, tokens: Tensor, w: dict[str, Tensor]) -> Tensor:
        """Token plus position embeddings (R, D, S, B) of ``tokens`` (R, B, S) in the
        residual stream (through the map d → d_h)."""
        R, B, S = tokens.shape
        embed = w["embed"] if "proj" not in w else torch.bmm(w["embed"], w["proj"].mT)
        table = (embed[:, None] + w["pos"][:, :S, None]).flatten(1, 2).mT  # (R, D, S·N)
        columns = (tokens + torch.arange(S, device=tokens.device) * self.N).mT  # (R, S, B)
        columns = columns.reshape(R, 1, S * B).expand(-1, table.shape[1], -1)
        return torch.gather(table, 2, columns).view(R, -1, S, B)

    @classmethod
    def attend(cls, x: Tensor, score: Tensor, values: Tensor, total: Tensor) -> Tensor:
        """The residual (R, D, B) of the last position of ``x`` (R, D, S, B) after one layer's
        heads, merged (:meth:`merged_heads`; the module's docstring)."""
        R, d_res, S, B = x.shape
        earlier, last = x.split([S - 1, 1], 2)
        query = last.squeeze(2)  # (R, D, B)
        if total.shape[-1] > d_res:  # the biases ride on x̃'s constant coordinate
            query = torch.cat([query, query.new_ones(R, 1, B)], 1)  # x̃ (R, D', B)
        out = torch.baddbmm(last.squeeze(2), total, query)  # x + Σ_h (M_h x̃ + b_O)
        if S == 1:
            return out
        delta = earlier - last  # δ_s (R, D, S-1, B)
        pairs = delta[:, :, None] * query[:, None, :, None]  # δ_s ⊗ x̃ (R, D, D', S-1, B)
        above = torch.bmm(score.flatten(2), pairs.view(R, -1, (S - 1) * B))  # (R, H, (S-1)·B)
        attn = cls.weigh(above.view(R, -1, S - 1, B))  # a_sh (R, H, S-1, B)
        # Σ_h a_sh M_h[:, :D] (R, D·D, (S-1)·B), then applied to δ_s
        mix = torch.bmm(values.flatten(2).mT, attn.reshape(R, -1, (S - 1) * B))
        return out + (mix.view(R, d_res, d_res, S - 1, B) * delta[:, None]).sum((2, 3))

    def merged_heads(self, w: dict[str, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
        """The merged matrices of every layer: A_h (R, L, H, D, D'), W_O W_V (R, L, H, D, D)
        and the sum over heads of M_h with b_O added to its constant column (R, L, D, D')."""
        R, L, H, _, d_res = w["w_q"].shape

        def per_head(name: str) -> Tensor:
            return w[name].flatten(0, 2)  # (R·L·H, ...)

        w_q, w_o = per_head("w_q"), per_head("w_o")
        values = torch.bmm(w_o, per_head("w_v")).view(R, L, H, d_res, d_res)
        total = values.sum(2)
        if "b_q" in w:
            w_q = torch.cat([w_q, per_head("b_q")[..., None]], -1)  # (W_Q | b_Q)
            bias = torch.baddbmm(per_head("b_o")[..., None], w_o, per_head("b_v")[..., None])
            total = torch.cat([total, bias.view(R, L, H, d_res).sum(2)[..., None]], -1)
        score = torch.bmm(per_head("w_k").mT, w_q).view(R, L, H, d_res, -1)
        return score * self.scale.view(R, 1, 1, 1, 1), values, total

    @staticmethod
    def weigh(above: Tensor) -> Tensor:
        """Attention weights (R, H, S-1, B) of the earlier positions from their scores: the
        softmax over them and the query's own score 0 (one earlier position: the sigmoid)."""
        if above.shape[2] == 1:
            return torch.sigmoid(above)
        own = above.new_zeros(above[:, :, :1].shape)
        return torch.softmax(torch.cat([above, own], 2), 2)[:, :, :-1]

    @staticmethod
    def mlp(x: Tensor, w: dict[str, Tensor], layer: int) -> Tensor:
        """Residuals (R, D, B) (examples last) plus their GELU MLP, biases inside the products."""
        hidden = torch.baddbmm(w["mlp_bias"][:, layer, :, None], w["mlp_in"][:, layer], x)
        out = torch.baddbmm(x, w["mlp_out"][:, layer], nn.functional.gelu(hidden))  # (R, D, B)
        return out if "mlp_out_bias" not in w else out + w["mlp_out_bias"][:, layer, :, None]

    @staticmethod
    def read_out(x: Tensor, w: dict[str, Tensor]) -> Tensor:
        """Logits (R, N, B) of residuals (R, D, B)."""
        if "unembed_bias" not in w:
            return torch.bmm(w["unembed"], x)
        return torch.baddbmm(w["unembed_bias"][..., None], w["unembed"], x)


class AoTStep(AutogradStep):
    """The model's forward, the weighted loss class-major, autograd's backward."""

    name = "aot"

    def loss(
        self,
        model: nn.Module,
        inputs: tuple[Tensor, ...],
        targets: Tensor,
        weights: Tensor,
        objective: Objective,
    ) -> tuple[Tensor, Tensor]:
        if objective != "classification":
            return super().loss(model, inputs, targets, weights, objective)
        outputs = widened(self.outputs(model, inputs))  # (R, B, N)
        picked = torch.log_softmax(outputs.mT, 1).gather(1, targets[:, None])  # (R, 1, B)
        return -(picked.squeeze(1) * weights).sum(1), outputs
