"""Warm starts: every replica's trained parameters out of a batched model, and back into the
next one.

A series keeps its shape from rung to rung, and padded entries are zero in both batched
models, so copying the slice the two paddings share copies every real entry.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def trained_states(model: nn.Module) -> list[dict[str, Tensor]]:
    """Every replica's parameters (its slice of the batched model), in replica order."""
    parameters = list(model.named_parameters())
    return [
        {name: p[k].detach().clone() for name, p in parameters}
        for k in range(parameters[0][1].shape[0])
    ]


@torch.no_grad()
def warm_start(model: nn.Module, states: list[dict[str, Tensor] | None]) -> list[bool]:
    """Load each replica's state (None: keep its fresh initialisation) into its slice of
    ``model``; which replicas had one."""
    for k, state in enumerate(states):
        if state is None:
            continue
        for name, p in model.named_parameters():
            source = state[name]
            common = tuple(
                slice(0, min(a, b)) for a, b in zip(p.shape[1:], source.shape, strict=True)
            )
            p[k].zero_()
            p[k][common] = source[common]
    return [state is not None for state in states]
