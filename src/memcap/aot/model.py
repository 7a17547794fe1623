"""Replica-batched attention-only transformer (AoT) and one-head MLP-Transformer (paper B).

Two variants. ``paper`` (the paper's text): token embedding + additive positional embedding
in R^d, then ``depth`` layers of H causal attention heads (W_Q, W_K, W_V ∈ R^{d_h×d},
W_O ∈ R^{d×d_h}, added to the residual stream), optionally a GELU MLP of width w, then the
unembedding W_U ∈ R^{N×d}. ``authors`` (the authors' published code): one shared linear map
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

Speed: with one layer the residual at position s depends only on its token, so for all N^S
inputs queries, keys and values are computed once per token and the scores gathered from N×N
tables; a mini-batch goes through merged head matrices (:meth:`ReplicaTransformer.batch_logits`;
a training step without autograd: :meth:`ReplicaTransformer.gradient_step`).
:meth:`ReplicaTransformer.sequence_logits` (per example, any depth) is what they match.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from memcap.aot.direct import MASKED, direct_step
from memcap.aot.merged import MergedAttention
from memcap.aot.settings import Setting
from memcap.aot.step import NAMES as STEP_NAMES
from memcap.aot.step import MergedStep
from memcap.aot.tasks import all_sequences, sequence_index
from memcap.training.fused_loss import ExampleLoss
from memcap.training.objectives import example_losses

# Parameter name → shape from one replica's (N, S, d, d_h, H, L, w, D); D is the residual
# dimension (d for the paper's variant, d_h for the authors').
_SHAPES = {
    "embed": lambda N, S, d, dh, H, L, w, D: (N, d),
    "proj": lambda N, S, d, dh, H, L, w, D: (dh, d),
    "pos": lambda N, S, d, dh, H, L, w, D: (S, D),
    "w_q": lambda N, S, d, dh, H, L, w, D: (L, H, dh, D),
    "w_k": lambda N, S, d, dh, H, L, w, D: (L, H, dh, D),
    "w_v": lambda N, S, d, dh, H, L, w, D: (L, H, dh, D),
    "w_o": lambda N, S, d, dh, H, L, w, D: (L, H, D, dh),
    "b_q": lambda N, S, d, dh, H, L, w, D: (L, H, dh),
    "b_k": lambda N, S, d, dh, H, L, w, D: (L, H, dh),
    "b_v": lambda N, S, d, dh, H, L, w, D: (L, H, dh),
    "b_o": lambda N, S, d, dh, H, L, w, D: (L, H, D),
    "mlp_in": lambda N, S, d, dh, H, L, w, D: (L, w, D),
    "mlp_bias": lambda N, S, d, dh, H, L, w, D: (L, w),
    "mlp_out": lambda N, S, d, dh, H, L, w, D: (L, D, w),
    "mlp_out_bias": lambda N, S, d, dh, H, L, w, D: (L, D),
    "unembed": lambda N, S, d, dh, H, L, w, D: (N, D),
    "unembed_bias": lambda N, S, d, dh, H, L, w, D: (N,),
}
# Parameters of the authors' variant only.
_AUTHORS_ONLY = ("proj", "b_q", "b_k", "b_v", "b_o", "mlp_out_bias", "unembed_bias")


def _dims(s: Setting) -> tuple[int, ...]:
    residual = s.d_h if s.variant == "authors" else s.d
    return (s.N, s.S, s.d, s.d_h, s.H, s.depth, s.width, residual)


def _init_replica(s: Setting, seed: int) -> dict[str, Tensor]:
    """One replica's parameters at its own shape, drawn from its own generator."""
    g = torch.Generator().manual_seed(seed)
    if s.variant == "authors":
        return _init_authors(s, g)
    fan_in = {"w_q": s.d, "w_k": s.d, "w_v": s.d, "w_o": s.d_h, "mlp_in": s.d, "mlp_out": s.width}
    params = {}
    for name, shape_of in _SHAPES.items():
        if name in _AUTHORS_ONLY:
            continue
        shape = shape_of(*_dims(s))
        if name == "mlp_bias":
            params[name] = torch.zeros(shape)
        else:
            # embeddings: unit variance per coordinate; matrices: variance 1 / fan-in
            std = 1.0 / math.sqrt(max(1, fan_in.get(name, s.d if name == "unembed" else 1)))
            params[name] = torch.randn(shape, generator=g) * std
    return params


def _init_authors(s: Setting, g: torch.Generator) -> dict[str, Tensor]:
    """PyTorch's initialisations of the authors' modules (Embedding, Linear, MultiheadAttention)."""
    dims = _dims(s)
    D, dh = dims[-1], s.d_h

    def uniform(name: str, bound: float) -> Tensor:
        shape = _SHAPES[name](*dims)
        return (torch.rand(shape, generator=g) * 2 - 1) * bound

    params = {
        "embed": torch.randn(_SHAPES["embed"](*dims), generator=g),
        "proj": torch.eye(dh, s.d) if dh == s.d else uniform("proj", s.d**-0.5),
        "pos": torch.randn(_SHAPES["pos"](*dims), generator=g) * 0.02,
    }
    xavier = math.sqrt(6.0 / (dh + 3 * dh))  # in_proj_weight (3 d_h × d_h), Xavier-uniform
    for name in ("w_q", "w_k", "w_v"):
        params[name] = uniform(name, xavier)
    params["w_o"] = uniform("w_o", dh**-0.5)
    for name in ("b_q", "b_k", "b_v", "b_o"):
        params[name] = torch.zeros(_SHAPES[name](*dims))
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


def _plus(x: Tensor, bias: Tensor | None) -> Tensor:
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
        dims = tuple(max(column) for column in zip(*(_dims(s) for s in settings), strict=True))
        self.has_mlp = dims[6] > 0
        self.padded = len({s.shape_key() for s in settings}) > 1
        # the shared map d -> d_h is learned where d_h != d, fixed to the identity elsewhere
        learned_proj = [s.d_h != s.d for s in settings]
        self.names = [
            n
            for n in _SHAPES
            if (self.has_mlp or not n.startswith("mlp"))
            and (self.variant == "authors" or n not in _AUTHORS_ONLY)
            and (n != "proj" or any(learned_proj))
        ]
        replicas = [_init_replica(s, seed) for s, seed in zip(settings, seeds, strict=True)]
        for name in self.names:
            shape = _SHAPES[name](*dims)
            value = torch.stack([_pad(r[name], shape) for r in replicas])
            self.register_parameter(name, nn.Parameter(value))
            if self.padded or name == "proj":
                ones = [_pad(torch.ones_like(r[name]), shape) for r in replicas]
                if name == "proj":
                    ones = [m * float(k) for m, k in zip(ones, learned_proj, strict=True)]
                self.register_buffer(f"{name}_mask", torch.stack(ones))
        if "proj" in self.names:
            fixed = [
                _pad(r["proj"], dims[3:1:-1]) * float(not k)
                for r, k in zip(replicas, learned_proj, strict=True)
            ]
            self.register_buffer("proj_fixed", torch.stack(fixed))
        self.register_buffer("scale", torch.tensor([s.d_h**-0.5 for s in settings]))
        self.register_buffer("sequences", all_sequences(self.N, self.S))
        self.register_buffer("_row_ids", torch.arange(self.N**self.S))

    def weights(self) -> dict[str, Tensor]:
        """Every parameter with padded entries masked to zero (and the fixed identity maps)."""
        w = {name: getattr(self, name) for name in self.names}
        for name in MASKED:  # padded entries that would reach the logits unmasked
            if name in w and (self.padded or name == "proj"):
                w[name] = w[name] * getattr(self, f"{name}_mask")
        if "proj" in w:
            w["proj"] = w["proj"] + self.proj_fixed
        return w

    def embedded(self, w: dict[str, Tensor]) -> Tensor:
        """(R, N, D) token embeddings in the residual stream (through the map d → d_h)."""
        if "proj" not in w:
            return w["embed"]
        return torch.einsum("rnd,red->rne", w["embed"], w["proj"])

    def forward(self, tokens: Tensor) -> Tensor:
        """Next-token logits (R, B, N) after input sequences ``tokens`` (R, B, S)."""
        if self.depth > 1:
            return self.sequence_logits(tokens)[:, :, -1]
        path = self._path(tokens)
        if path == "merged":
            return self.batch_logits(tokens)  # per example, merged heads
        if path == "all":
            return self.all_logits()  # the full data set in table order (full-batch training)
        rows = sequence_index(tokens, self.N)[..., None].expand(-1, -1, self.N)
        return torch.gather(self.all_logits(), 1, rows)

    def _path(self, tokens: Tensor) -> str:
        """How a one-layer forward computes ``tokens`` (R, B, S): ``all`` (every input in table
        order: the table path), ``merged`` (merged heads per example) or ``gather`` (rows of
        the table path). The table path takes more operations per call: it pays where it
        computes at most a quarter as many rows as the batch has (a batch of 256 over N^S =
        100 does not)."""
        rows = sequence_index(tokens, self.N)  # (R, B)
        table_order = rows.shape[1] == self.N**self.S and torch.equal(rows[0], self._row_ids)
        if table_order and bool((rows == rows[0]).all()):
            return "all"
        return "merged" if rows.shape[1] < 4 * self.N**self.S else "gather"

    def _token_tables(self, w: dict[str, Tensor]) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Residual, query, key and value-output of every token at every position (one layer).

        Returns:
            x (R, S, N, D), q (R, N, H, dh) of the last position (scaled), k (R, S, N, H, dh)
            and ov = W_O (W_V x + b_V) + b_O (R, S, N, H, D).
        """
        R = self.embed.shape[0]
        x_tab = self.embedded(w)[:, None] + w["pos"][:, :, None]  # (R, S, N, D): token n at s
        b = {n: w[n][:, 0] if n in w else None for n in ("b_q", "b_k", "b_v", "b_o")}  # (R, H, .)
        # heads last throughout: the head contraction below then reads contiguous memory
        q = torch.einsum("rhed,rnd->rnhe", w["w_q"][:, 0], x_tab[:, -1])  # (R, N, H, dh)
        q = _plus(q, _expand(b["b_q"], 1)) * self.scale.view(R, 1, 1, 1)
        k = torch.einsum("rhed,rsnd->rsnhe", w["w_k"][:, 0], x_tab)  # (R, S, N, H, dh)
        k = _plus(k, _expand(b["b_k"], 1, 2))
        v = _plus(torch.einsum("rhed,rsnd->rsnhe", w["w_v"][:, 0], x_tab), _expand(b["b_v"], 1, 2))
        # attention weights sum to one, so the output bias can ride on every value
        ov = torch.einsum("rhde,rsnhe->rsnhd", w["w_o"][:, 0], v)  # (R, S, N, H, D)
        return x_tab, q, k, _plus(ov, _expand(b["b_o"], 1, 2))

    def batch_logits(self, tokens: Tensor) -> Tensor:
        """Last-position logits (R, B, N) of ``tokens`` (R, B, S), through merged head matrices.

        One layer. With x the last residual, x̃ = (x, 1) and δ_s = x_s − x, head h scores
        position s above the last one by δ_s^T A_h x̃ (A_h = W_K^T (W_Q | b_Q) / √d_h: the key
        bias cancels in the softmax), and the heads add Σ_h M_h x̃ + Σ_h b_O + Σ_s Σ_h a_sh
        M_h δ_s to the residual (M_h = W_O (W_V | b_V)); :mod:`memcap.aot.merged`. The
        paper's variant has no biases and no constant coordinate.
        """
        w = self.weights()
        out = self._merged_residual(tokens, w)
        if "b_o" in w:
            out = out + w["b_o"].squeeze(1).sum(1)[..., None]
        out = out.transpose(1, 2)  # (R, B, D)
        if self.has_mlp:
            out = out + self._mlp(out, w, 0)
        return self._unembed(out, w)

    def weighted_loss(
        self, tokens: Tensor, targets: Tensor, weights: Tensor, objective: str
    ) -> tuple[Tensor, Tensor]:
        """Per-replica weighted loss (R,) and logits (R, B, N) of a training step (the loop's
        hook): a classification mini-batch through merged heads (S ≥ 2) is one node with a
        hand-written backward (:class:`memcap.aot.step.MergedStep`), any other the plain one."""
        if not self._one_node(tokens, objective):
            outputs = self(tokens).float()
            return (example_losses(outputs, targets, objective) * weights).sum(1), outputs
        loss = ExampleLoss(targets, weights, classification=True)
        w = self.weights()
        per_replica, logits = MergedStep.apply(
            tokens, self.scale, loss, self.N, *(w.get(name) for name in STEP_NAMES)
        )
        return per_replica, logits.transpose(1, 2)

    def gradient_step(self, tokens: Tensor, targets: Tensor, weights: Tensor, objective: str):
        """The loop's hook: the one-node step, gradients set (:mod:`memcap.aot.direct`) or None."""
        if self._one_node(tokens, objective):
            return direct_step(self, tokens, targets, weights)

    def _one_node(self, tokens: Tensor, objective: str) -> bool:
        one = objective == "classification" and self.depth == 1 and self.S >= 2
        return one and self._path(tokens) == "merged"  # a mini-batch of S >= 2, one layer

    def _merged_residual(self, tokens: Tensor, w: dict[str, Tensor]) -> Tensor:
        """The last position's residual (R, D, B) after the heads, without their output biases."""
        if self.depth != 1:
            raise NotImplementedError("the merged heads cover one layer; use sequence_logits")
        R, B, S = tokens.shape
        table = self.embedded(w)[:, None] + w["pos"][:, :, None]  # (R, S, N, D)
        table = table.flatten(1, 2).transpose(1, 2)  # (R, D, S·N): column n + s·N
        D = table.shape[1]
        cols = (tokens + torch.arange(S, device=tokens.device) * self.N).transpose(1, 2)
        xs = torch.gather(table, 2, cols.reshape(R, 1, S * B).expand(-1, D, -1))
        earlier, x = xs.view(R, D, S, B).split([S - 1, 1], 2)  # examples last
        x = x.squeeze(2)  # (R, D, B): the query's residual
        q, k, v, o = (w[n].squeeze(1) for n in ("w_q", "w_k", "w_v", "w_o"))  # (R, H, ., .)
        bias = "b_q" in w  # the biases ride on a constant last coordinate of x
        if bias:
            q = torch.cat([q, w["b_q"].squeeze(1)[..., None]], -1)  # (R, H, dh, D+1)
            v = torch.cat([v, w["b_v"].squeeze(1)[..., None]], -1)
        merged = torch.matmul(o, v)  # (R, H, D, D')
        if S > 1:
            score = torch.matmul(k.transpose(-1, -2), q) * self.scale.view(R, 1, 1, 1)
            out = MergedAttention.apply(x, earlier, score, merged, bias)
        else:
            x_one = torch.cat([x, x.new_ones(R, 1, B)], 1) if bias else x
            out = torch.baddbmm(x, merged.sum(1), x_one)  # x + Σ_h M_h x̃
        return out

    def all_logits(self) -> Tensor:
        """Last-position logits (R, N^S, N) of every input sequence (one layer only)."""
        if self.depth != 1:
            raise NotImplementedError("the table path covers one layer; use sequence_logits")
        w = self.weights()
        R, N, S = self.embed.shape[0], self.N, self.S
        seq = self.sequences  # (T0, S)
        x_tab, q, k, ov = self._token_tables(w)
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
        last = torch.index_select(x_tab[:, -1], 1, seq[:, -1])  # (R, T0, D)
        x = last + out
        if self.has_mlp:
            x = x + self._mlp(x, w, 0)
        return self._unembed(x, w)

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
            q = _plus(q, _expand(b["b_q"], 1, 3))
            k = torch.einsum("rbsd,rhed->rbhse", x, w["w_k"][:, layer])
            k = _plus(k, _expand(b["b_k"], 1, 3))
            v = torch.einsum("rbsd,rhed->rbhse", x, w["w_v"][:, layer])
            v = _plus(v, _expand(b["b_v"], 1, 3))
            scores = torch.einsum("rbhse,rbhte->rbhst", q, k) * self.scale.view(R, 1, 1, 1, 1)
            attn = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
            heads = torch.einsum("rbhst,rbhte->rbhse", attn, v)
            x = x + torch.einsum("rbhse,rhde->rbsd", heads, w["w_o"][:, layer])
            if b["b_o"] is not None:
                x = x + b["b_o"].sum(1)[:, None, None]  # every head's output bias
            if self.has_mlp:
                x = x + self._mlp(x.view(R, B * S, -1), w, layer).view(x.shape)
        return self._unembed(x.view(R, B * S, -1), w).view(R, B, S, -1)

    @staticmethod
    def _mlp(x: Tensor, w: dict[str, Tensor], layer: int) -> Tensor:
        """GELU MLP on (R, T, D) residuals: batched products with the biases inside (an einsum
        records a permute, reshape and view, and their backward, around each product)."""
        hidden = torch.baddbmm(w["mlp_bias"][:, layer, None], x, w["mlp_in"][:, layer].mT)
        hidden = nn.functional.gelu(hidden)
        if "mlp_out_bias" not in w:
            return torch.bmm(hidden, w["mlp_out"][:, layer].mT)
        return torch.baddbmm(w["mlp_out_bias"][:, layer, None], hidden, w["mlp_out"][:, layer].mT)

    @staticmethod
    def _unembed(x: Tensor, w: dict[str, Tensor]) -> Tensor:
        """Logits (R, T, N) of residuals (R, T, D)."""
        if "unembed_bias" not in w:
            return torch.bmm(x, w["unembed"].mT)
        return torch.baddbmm(w["unembed_bias"][:, None], x, w["unembed"].mT)


def _expand(bias: Tensor | None, *axes: int) -> Tensor | None:
    """A per-head bias (R, H, e) with singleton ``axes`` inserted after R, for broadcasting."""
    if bias is None:
        return None
    for axis in sorted(axes):
        bias = bias.unsqueeze(axis)
    return bias
