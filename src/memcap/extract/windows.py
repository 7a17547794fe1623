"""Windowed attention (Swin): each window of M × M tokens is one context of n = M² tokens.

A Swin block partitions its token grid into windows and attends within each; odd blocks of a
stage first shift the grid cyclically by ⌊M/2⌋ (shifted windows), and each stage after the
first starts by merging 2 × 2 patches (half the grid, twice the width). Paper A's context is
what one query reads through one attention layer, so layer k's context is a window of the
block that reads layer k's states, block k + 1:

* layer 0 (the patch embeddings as block 1 sees them) and layer k < depth inside a stage: the
  windows of block k + 1, shifted where it shifts;
* the last layer of a stage: no attention reads these states (the next stage merges patches
  first), so the stage's regular windows.

Each example's context is window 0 of its image: the top-left window of the (shifted) grid,
the one window that the shifted blocks' mask leaves whole. Its rows are the window's tokens in
row-major order; the query is one of them (``query_index``, default 0: the window's first
token, whose output the attention computes from exactly this context).
Blocks are found by their attributes (``window_size``, ``shift_size``, ``input_resolution``):
timm's SwinTransformer and SwinTransformerV2 and transformers' SwinModel have them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

_BLOCK_ATTRIBUTES = ("window_size", "shift_size", "input_resolution")
_HEAD_ATTRIBUTES = ("num_heads", "num_attention_heads")


@dataclass(frozen=True)
class WindowLayer:
    """Where one layer's contexts come from in a windowed model."""

    stage: int  # 0-based stage whose tokens the states are
    grid: tuple[int, int]  # token grid (H, W) of that stage
    window: tuple[int, int]  # window (M_h, M_w) in tokens
    shift: tuple[int, int]  # cyclic shift of the reading block (0, 0: regular windows)
    width: int  # d, the stage's hidden size
    heads: int | None  # attention heads of the stage's blocks
    read_by: int | None  # 1-based block whose attention reads these windows (None: stage end)

    @property
    def n(self) -> int:
        """Tokens per window: the context size."""
        return self.window[0] * self.window[1]

    @property
    def head_dim(self) -> int | None:
        """d_h of the stage's heads."""
        return self.width // self.heads if self.heads else None

    def record(self) -> dict[str, Any]:
        """The provenance record of the layer's windows."""
        return {
            **asdict(self),
            "n": self.n,
            "shifted": any(self.shift),
            "first_token": list(self.shift),  # grid position of window 0's first token
        }


def window_blocks(model: nn.Module) -> list[tuple[int, nn.Module]]:
    """(stage, block) of every windowed-attention block of ``model``, in forward order."""
    blocks, stages = [], {}
    for name, module in model.named_modules():
        if all(hasattr(module, a) for a in _BLOCK_ATTRIBUTES):
            parent = name.rpartition(".")[0].rpartition(".")[0]  # the stage holding its list
            stage = stages.setdefault(parent, len(stages))
            blocks.append((stage, module))
    return blocks


def is_windowed(model: nn.Module) -> bool:
    """Whether the model attends within windows (Swin)."""
    return bool(window_blocks(model))


def _pair(value: Any) -> tuple[int, int]:
    return (int(value), int(value)) if isinstance(value, int) else (int(value[0]), int(value[1]))


def _width(block: nn.Module) -> int:
    """A Swin block's d: the size its layer norms normalise."""
    norm = next(m for m in block.modules() if isinstance(m, nn.LayerNorm))
    return int(norm.normalized_shape[0])


def _heads(block: nn.Module) -> int | None:
    for module in block.modules():
        for name in _HEAD_ATTRIBUTES:
            if isinstance(getattr(module, name, None), int):
                return int(getattr(module, name))
    return None


def window_layers(model: nn.Module) -> tuple[WindowLayer, ...]:
    """The windows of layers 0, 1, ..., depth of a windowed model (module docstring).

    Raises:
        ValueError: a stage whose grid is not a whole number of windows (window 0 would hold
            padding or wrap around).
    """
    blocks = window_blocks(model)
    layers = []
    for layer in range(len(blocks) + 1):
        producer = blocks[max(layer - 1, 0)]  # whose output (or input, at 0) the states are
        reader = blocks[layer] if layer < len(blocks) else None
        if reader is not None and reader[0] != producer[0]:
            reader = None  # the next stage merges patches before its attention
        stage, block = producer
        grid, window = _pair(block.input_resolution), _pair(block.window_size)
        if grid[0] % window[0] or grid[1] % window[1]:
            raise ValueError(
                f"stage {stage}'s grid {grid[0]} x {grid[1]} is no whole number of "
                f"{window[0]} x {window[1]} windows"
            )
        shift = _pair(reader[1].shift_size) if reader is not None else (0, 0)
        layers.append(
            WindowLayer(
                stage=stage,
                grid=grid,
                window=window,
                shift=shift,
                width=_width(block),
                heads=_heads(block),
                read_by=layer + 1 if reader is not None else None,
            )
        )
    return tuple(layers)


def stage_records(layers: tuple[WindowLayer, ...]) -> list[dict[str, Any]]:
    """One provenance record per stage: its blocks, grid, window, n and d."""
    stages: dict[int, dict[str, Any]] = {}
    for k, layer in enumerate(layers[1:], start=1):
        record = stages.setdefault(
            layer.stage,
            {
                "stage": layer.stage,
                "blocks": [],
                "grid": list(layer.grid),
                "window": list(layer.window),
                "n": layer.n,
                "d": layer.width,
                "heads": layer.heads,
            },
        )
        record["blocks"].append(k)
    return list(stages.values())


def window_context(states: torch.Tensor, layer: WindowLayer) -> torch.Tensor:
    """Window 0 of each example's (B, H, W, d) or (B, H·W, d) states: (B, n, d)."""
    grid = states.reshape(len(states), *layer.grid, states.shape[-1])  # (B, H, W, d)
    if any(layer.shift):
        grid = torch.roll(grid, shifts=(-layer.shift[0], -layer.shift[1]), dims=(1, 2))
    window = grid[:, : layer.window[0], : layer.window[1]]  # (B, M_h, M_w, d)
    return window.reshape(len(states), layer.n, states.shape[-1])


class _Reached(Exception):
    """Raised by the last needed block's hook: the forward has what it needs."""


class WindowedTrunk(nn.Module):
    """Window 0 of layers 0 ... ``depth`` of a windowed model, from one forward that stops
    after block ``depth`` (the later blocks, the final norm and the head never run)."""

    def __init__(self, model: nn.Module, depth: int) -> None:
        super().__init__()
        self.model = model
        self.depth = depth
        self.layers = window_layers(model)[: depth + 1]

    def all_hidden_states(self, batch: Any) -> tuple[torch.Tensor, ...]:
        """Contexts (B, n_k, d_k) of layers 0, ..., ``depth``."""
        blocks = [block for _, block in window_blocks(self.model)]
        states: list[torch.Tensor] = []

        def record(output: Any) -> None:
            hidden = output[0] if isinstance(output, tuple) else output
            states.append(window_context(hidden, self.layers[len(states)]))
            if len(states) == self.depth + 1:
                raise _Reached

        def block_input(_module: nn.Module, args: tuple, kwargs: dict) -> None:
            record(args[0] if args else kwargs["hidden_states"])

        def block_output(_module: nn.Module, _args: tuple, output: Any) -> None:
            record(output)

        handles = [blocks[0].register_forward_pre_hook(block_input, with_kwargs=True)]
        handles += [block.register_forward_hook(block_output) for block in blocks[: self.depth]]
        inputs = batch if isinstance(batch, dict) else {"pixel_values": batch}
        try:
            if hasattr(self.model, "config"):
                self.model(**inputs)
            else:
                self.model(inputs["pixel_values"])
        except _Reached:
            pass
        finally:
            for handle in handles:
                handle.remove()
        if len(states) != self.depth + 1:
            raise ValueError(f"{len(states)} window states from a model of {self.depth} blocks")
        return tuple(states)

    def forward(self, batch: Any) -> torch.Tensor:
        """Contexts (B, n, d) of layer ``depth``."""
        return self.all_hidden_states(batch)[-1]
