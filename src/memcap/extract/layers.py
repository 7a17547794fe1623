"""Hidden states at one layer, or at several layers from one forward pass.

Layer 0 is the embedding output (what the model itself reports as ``hidden_states[0]``);
layer k is the output of block k, before any final norm; ``random_attention`` is paper A's
Proposition 4 variant: a LayerNorm without affine parameters on the layer-0 embeddings, then
one randomly initialised single-head attention layer with a skip connection.

:func:`block_layout` is the one place that knows where each family keeps its blocks: a stack
(one ``nn.ModuleList``: timm ``blocks``; transformers ``encoder.layer``, ``h``, ``layers``, an
encoder-decoder's encoder stack ``block`` / ``layers``, ...), a shared block applied ``depth``
times (ALBERT's ``albert_layer_groups``: layer k is the output of the k-th application), or a
timm model whose blocks take more than the states (BEiT's relative bias, EVA-02's rotary
embedding: read by hooks on its own ``forward_features``), or a timm CaiT, whose
class-attention ``blocks_token_only`` follow its S self-attention ``blocks``: layer k < S is the
patch tokens after k blocks (no class token: refused in the dry run), layer S + k the class
token after class-attention block k prepended to the patches after block S, what block k + 1
reads (:func:`class_attention_states`). A model it cannot read is refused before any job
(:func:`memcap.extract.registry.architecture`). Windowed models (Swin) go through
:class:`~memcap.extract.windows.WindowedTrunk` instead: each layer's contexts are one window.
The truncated model keeps the embeddings and the first ``depth`` blocks and drops the
final norm, so its ``last_hidden_state`` is the raw residual stream after block ``depth``.
:class:`MultiLayerExtractor` runs that truncated model once, up to the deepest requested
block, and keeps the hidden states of every requested layer: L requested blocks cost L blocks
of compute per batch, not L(L+1)/2 as one truncated forward per layer would.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from memcap.extract.layer_spec import RANDOM_ATTENTION, Layer
from memcap.extract.windows import WindowedTrunk, is_windowed

Batch = torch.Tensor | dict[str, torch.Tensor]

# Norms applied after the last block only (GPT-2 ln_f, Llama norm, HF ViT / DINOv2 layernorm,
# OPT and T5 final_layer_norm, mBART's encoder layer_norm); the truncated model replaces them
# by the identity.
FINAL_NORMS = ("ln_f", "norm", "final_layer_norm", "final_layernorm", "layernorm", "layer_norm")
# Heads reading the last block (BERT pooler, CLIP post_layernorm on the pooled token).
UNUSED_HEADS = ("pooler",)


def blocks_needed(layer: Layer) -> int:
    """Number of transformer blocks a forward pass must run to reach ``layer``."""
    return 0 if layer == RANDOM_ATTENTION else int(layer)


@dataclass(frozen=True)
class BlockLayout:
    """Where a model's transformer blocks are, and how a forward reaches them."""

    path: str  # dotted name of the blocks' ModuleList (shared: of the shared groups)
    depth: int  # blocks the model runs (shared: applications of the shared groups)
    shared: bool = False  # one set of block parameters applied ``depth`` times (ALBERT)
    hooked: bool = False  # timm: read by hooks on forward_features (not vit_hidden_states)
    # CaiT: the number of self-attention blocks before the class-attention ones (their layers,
    # below this one, hold no class token)
    class_attention: int | None = None


def block_layout(model: nn.Module) -> BlockLayout:
    """The layout of ``model``'s blocks: the one function that knows each family's.

    timm: ``blocks`` (a VisionTransformer's read directly; BEiT's, EVA's and other global
    models' through their ``forward_features``; CaiT's followed by its class-attention
    ``blocks_token_only``, both counted in the depth); transformers: the shallowest
    ModuleList whose length is ``config.num_hidden_layers``, else the ``num_hidden_groups``
    shared groups that the forward applies ``num_hidden_layers`` times (ALBERT).

    Raises:
        ValueError: no such blocks (the reason, in words).
    """
    config = getattr(model, "config", None)
    blocks = getattr(model, "blocks", None)
    if config is None and isinstance(blocks, nn.ModuleList | nn.Sequential):
        from timm.models.vision_transformer import VisionTransformer

        token_only = getattr(model, "blocks_token_only", None)
        if isinstance(token_only, nn.ModuleList | nn.Sequential):  # CaiT
            if getattr(model, "cls_token", None) is None:
                raise ValueError(f"{type(model).__name__} has class attention but no class token")
            return BlockLayout("blocks", len(blocks) + len(token_only), class_attention=len(blocks))

        plain = isinstance(model, VisionTransformer)
        if not plain and not callable(getattr(model, "forward_features", None)):
            raise ValueError(f"{type(model).__name__} has blocks but no forward_features")
        return BlockLayout("blocks", len(blocks), hooked=not plain)
    depth = getattr(config, "num_hidden_layers", None)
    lists = [(n, m) for n, m in model.named_modules() if isinstance(m, nn.ModuleList)]
    stacks = [name for name, module in lists if len(module) == depth]
    if stacks:
        return BlockLayout(min(stacks, key=lambda name: name.count(".")), int(depth))
    groups = getattr(config, "num_hidden_groups", None)
    shared = [name for name, module in lists if isinstance(groups, int) and len(module) == groups]
    if shared and isinstance(depth, int) and depth % groups == 0:
        return BlockLayout(min(shared, key=lambda name: name.count(".")), depth, shared=True)
    raise ValueError(
        f"no list of {depth} blocks, nor of shared blocks applied {depth} times, in "
        f"{type(model).__name__}"
    )


def block_path(model: nn.Module) -> str:
    """Dotted name of the ``nn.ModuleList`` holding the model's transformer blocks
    (:func:`block_layout`).

    Raises:
        ValueError: no such list (not a block-stacked transformer).
    """
    return block_layout(model).path


class _Reached(Exception):  # noqa: N818 - a signal, not an error
    """Raised by a hook once the forward has produced every state it is asked for."""


def hooked_states(
    run: Callable[[], object], blocks: Sequence[nn.Module], depth: int
) -> tuple[torch.Tensor, ...]:
    """States after 0, 1, ..., ``depth`` block calls of ``run()``: the first call's input,
    then each call's output (a shared block counts once per application). The forward stops
    once they are all in: no deeper block and no final norm runs."""
    states: list[torch.Tensor] = []

    def block_input(_module: nn.Module, args: tuple, kwargs: dict) -> None:
        if not states:
            states.append(args[0] if args else kwargs["hidden_states"])
            if depth == 0:
                raise _Reached

    def block_output(_module: nn.Module, _args: tuple, output: object) -> None:
        states.append(output[0] if isinstance(output, tuple) else output)
        if len(states) == depth + 1:
            raise _Reached

    modules = list(dict.fromkeys(blocks))  # a shared block hooked once
    handles = [m.register_forward_pre_hook(block_input, with_kwargs=True) for m in modules]
    handles += [m.register_forward_hook(block_output) for m in modules]
    try:
        run()
    except _Reached:
        pass
    finally:
        for handle in handles:
            handle.remove()
    if len(states) != depth + 1:
        raise ValueError(f"{len(states)} hidden states from a pass of {depth} blocks")
    return tuple(states)


def _owned_copy(module: nn.Module) -> nn.Module:
    """A shallow copy with its own child dict, so replacing a child leaves ``module`` whole."""
    clone = copy.copy(module)
    clone._modules = dict(module._modules)
    return clone


class TruncatedForward(nn.Module):
    """The embeddings and first ``depth`` blocks of a timm ViT or transformers model.

    The model is shallow-copied along the path to its block list, so the original keeps every
    block (the tests compare both) while sharing the same parameter tensors. A shared block
    (ALBERT) and a hooked timm model keep the whole model: their forward stops after ``depth``
    blocks (:func:`hooked_states`).
    """

    def __init__(self, model: nn.Module, depth: int) -> None:
        super().__init__()
        self.depth = depth
        self.is_timm = not hasattr(model, "config")
        self.layout = block_layout(model)
        self.block_path = self.layout.path
        self.model = _owned_copy(model)
        if self.layout.shared or self.layout.hooked or self.layout.class_attention is not None:
            return
        *parents, last = self.block_path.split(".")
        owner = self.model
        for name in parents:
            child = _owned_copy(getattr(owner, name))
            owner._modules[name] = child
            owner = child
        owner._modules[last] = getattr(owner, last)[:depth]
        if not self.is_timm:
            for holder in {id(self.model): self.model, id(owner): owner}.values():
                for name in FINAL_NORMS:
                    if isinstance(holder._modules.get(name), nn.Module):
                        holder._modules[name] = nn.Identity()
            for name in UNUSED_HEADS:
                if name in self.model._modules:
                    self.model._modules[name] = None

    def forward(self, batch: Batch) -> torch.Tensor:
        """Hidden states (B, tokens, d) after ``depth`` blocks."""
        if self.layout.shared or self.layout.hooked or self.layout.class_attention is not None:
            return self.all_hidden_states(batch)[-1]
        if self.is_timm:
            return vit_hidden_states(self.model, batch, self.depth)[-1]
        return self._run(batch).last_hidden_state

    def _run(self, batch: Batch) -> object:
        if self.is_timm:
            return self.model.forward_features(batch)
        inputs = batch if isinstance(batch, dict) else {"pixel_values": batch}
        return self.model(**inputs)

    def all_hidden_states(self, batch: Batch) -> tuple[torch.Tensor, ...]:
        """Hidden states (B, tokens, d) after 0, 1, ..., ``depth`` blocks, from one pass."""
        if self.layout.class_attention is not None:
            return class_attention_states(self.model, batch, self.depth)
        if self.layout.shared or self.layout.hooked:
            blocks = list(self.model.get_submodule(self.block_path))
            return hooked_states(lambda: self._run(batch), blocks, self.depth)
        if self.is_timm:
            return vit_hidden_states(self.model, batch, self.depth)
        if self.depth == 0:  # no block to record: the embeddings are the output
            return (self.forward(batch),)
        # Hooks on the kept blocks: the input of the first, then every block's output (the
        # same tensors the model's own hidden_states hold, whatever its output conventions).
        blocks = self.model.get_submodule(self.block_path)
        return hooked_states(lambda: self._run(batch), list(blocks), self.depth)


def vit_hidden_states(
    model: nn.Module, images: torch.Tensor, depth: int
) -> tuple[torch.Tensor, ...]:
    """A timm VisionTransformer's token states after 0, ..., ``depth`` blocks (no final norm)."""
    x = model.patch_embed(images)  # (B, patches, d)
    x = model._pos_embed(x)  # (B, tokens, d): prefix (class, register) tokens + positions
    x = model.patch_drop(x)
    x = model.norm_pre(x)
    states = [x]
    for block in model.blocks[:depth]:
        x = block(x)
        states.append(x)
    return tuple(states)


def class_attention_states(
    model: nn.Module, images: torch.Tensor, depth: int
) -> tuple[torch.Tensor, ...]:
    """A timm CaiT's token states after 0, ..., ``depth`` blocks (no final norm).

    With S self-attention blocks: states 0, ..., S - 1 are the patch tokens alone (what the
    self-attention blocks read: no class token); state S + k (k = 0, ..., the class-attention
    blocks run) is the class token after class-attention block k (k = 0: the learned class
    token) prepended to the patch tokens after the S blocks, [cls; patches]: what
    class-attention block k + 1 reads (its one query is the class token), as in timm's
    ``forward_cls``.
    """
    x = model.pos_drop(model.patch_embed(images) + model.pos_embed)  # (B, patches, d)
    S = len(model.blocks)
    states = [x]
    for block in list(model.blocks)[: min(depth, S)]:
        x = block(x)
        states.append(x)
    if depth < S:
        return tuple(states)
    cls = model.cls_token.expand(x.shape[0], -1, -1)
    states[S] = torch.cat((cls, x), dim=1)
    for block in list(model.blocks_token_only)[: depth - S]:
        cls = block(x, cls)
        states.append(torch.cat((cls, x), dim=1))
    return tuple(states)


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
        # float32 (or the float64 of the forward-error pass) whatever the trunk's precision
        z = self.norm(embeddings.to(self.attention.out_proj.weight.dtype))
        mixed, _ = self.attention(z, z, z, need_weights=False)
        return z + mixed


class LayerExtractor(nn.Module):
    """Everything between a model input batch and the hidden states of one layer."""

    def __init__(self, model: nn.Module, width: int, layer: Layer, seed: int) -> None:
        super().__init__()
        self.layer = layer
        self.trunk = TruncatedForward(model, blocks_needed(layer))
        self.head: nn.Module = nn.Identity()
        if layer == RANDOM_ATTENTION:
            self.head = RandomAttention(width, seed)

    def forward(self, batch: Batch) -> torch.Tensor:
        """Hidden states (B, tokens, d) at the requested layer."""
        return self.head(self.trunk(batch))


class MultiLayerExtractor(nn.Module):
    """The hidden states of several layers of one model from one forward pass per batch."""

    def __init__(self, model: nn.Module, width: int, layers: tuple[Layer, ...], seed: int) -> None:
        """``width``: d of layer 0, which the random attention layer reads."""
        super().__init__()
        self.layers = tuple(layers)
        depth = max(blocks_needed(x) for x in self.layers)
        windowed = is_windowed(model)
        self.trunk = WindowedTrunk(model, depth) if windowed else TruncatedForward(model, depth)
        self.head: nn.Module = nn.Identity()
        if RANDOM_ATTENTION in self.layers:
            self.head = RandomAttention(width, seed)

    def forward(self, batch: Batch) -> dict[Layer, torch.Tensor]:
        """Hidden states (B, tokens, d) of every requested layer, keyed by layer (windowed
        models: window 0, (B, n_k, d_k))."""
        states = self.trunk.all_hidden_states(batch)
        return {
            layer: self.head(states[0]) if layer == RANDOM_ATTENTION else states[int(layer)]
            for layer in self.layers
        }
