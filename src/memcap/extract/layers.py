"""Hidden states at one layer, running only the blocks that layer needs.

Layer 0 is the embedding output (what the model itself reports as ``hidden_states[0]``);
layer k is the output of block k, before any final norm; ``random_attention`` is paper A's
Proposition 4 variant: a LayerNorm without affine parameters on the layer-0 embeddings, then
one randomly initialised single-head attention layer with a skip connection.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from memcap.extract.config import RANDOM_ATTENTION, Layer

Batch = torch.Tensor | dict[str, torch.Tensor]


def blocks_needed(layer: Layer) -> int:
    """Number of transformer blocks a forward pass must run to reach ``layer``."""
    return 0 if layer == RANDOM_ATTENTION else int(layer)


class TruncatedForward(nn.Module):
    """The first ``depth`` blocks of a ViT / BERT / GPT-2 model and its embeddings.

    The model is shallow-copied with its block list cut, so the original keeps every block
    (the tests compare both) while sharing the same parameter tensors.
    """

    def __init__(self, model: nn.Module, family: str, depth: int) -> None:
        super().__init__()
        self.family = family
        self.depth = depth
        self.model = copy.copy(model)
        # copy.copy shares _modules with the original: give the copy its own dict first.
        self.model._modules = dict(model._modules)
        if family == "vit":
            self.model.blocks = model.blocks[:depth]
        elif family == "bert":
            self.model.encoder = copy.copy(model.encoder)
            self.model.encoder._modules = dict(model.encoder._modules)
            self.model.encoder.layer = model.encoder.layer[:depth]
            self.model.pooler = None  # the pooler reads the last layer, not needed here
        elif family == "gpt2":
            self.model.h = model.h[:depth]
            # ln_f follows the last block only; "output of block k" is the raw residual stream.
            self.model.ln_f = nn.Identity()
        else:
            raise ValueError(f"unknown family {family!r}")

    def forward(self, batch: Batch) -> torch.Tensor:
        """Hidden states (B, tokens, d) after ``depth`` blocks."""
        if self.family == "vit":
            return vit_hidden_states(self.model, batch, self.depth)
        return self.model(**batch).last_hidden_state


def vit_hidden_states(model: nn.Module, images: torch.Tensor, depth: int) -> torch.Tensor:
    """A timm VisionTransformer's token states after ``depth`` blocks (no final norm)."""
    x = model.patch_embed(images)  # (B, patches, d)
    x = model._pos_embed(x)  # (B, tokens, d): prefix tokens + position embedding
    x = model.patch_drop(x)
    x = model.norm_pre(x)
    for block in model.blocks[:depth]:
        x = block(x)
    return x


class RandomAttention(nn.Module):
    """Paper A's Proposition 4 layer: ``Z + Attn(Z)`` with ``Z = LayerNorm(X)`` (no affine).

    The single-head attention (query/key/value dimension d, output projection) is
    ``torch.nn.MultiheadAttention`` with its own initialisation, drawn under ``seed``. It is
    bidirectional for every family, as in the proposition.
    """

    def __init__(self, width: int, seed: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width, elementwise_affine=False)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.attention = nn.MultiheadAttention(width, num_heads=1, batch_first=True)

    def forward(self, embeddings: torch.Tensor) -> torch.Tensor:
        """(B, tokens, d) -> (B, tokens, d)."""
        z = self.norm(embeddings)
        mixed, _ = self.attention(z, z, z, need_weights=False)
        return z + mixed


class LayerExtractor(nn.Module):
    """Everything between a model input batch and the hidden states of one layer."""

    def __init__(self, model: nn.Module, family: str, layer: Layer, seed: int) -> None:
        super().__init__()
        self.layer = layer
        self.trunk = TruncatedForward(model, family, blocks_needed(layer))
        self.head: nn.Module = nn.Identity()
        if layer == RANDOM_ATTENTION:
            width = model.embed_dim if family == "vit" else model.config.hidden_size
            self.head = RandomAttention(width, seed)

    def forward(self, batch: Batch) -> torch.Tensor:
        """Hidden states (B, tokens, d) at the requested layer."""
        return self.head(self.trunk(batch))
