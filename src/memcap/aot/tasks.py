"""Paper B's next-token tasks over all N^S input sequences with a uniform prior."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import torch
from torch import Tensor

_logger = logging.getLogger(__name__)


@dataclass
class Task:
    """Every input sequence with its next-token target.

    Attributes:
        inputs: (T0, S) token ids; row i spells i in base N (first token most significant).
        targets: (T0,) next token (association) or (T0, N) conditional distribution.
        entropy: mean entropy of the targets in nats (0 for association): the floor of the
            cross-entropy, so mean KL(π ‖ model) = cross-entropy − entropy.
    """

    inputs: Tensor
    targets: Tensor
    entropy: float


def all_sequences(N: int, S: int, device: torch.device | str = "cpu") -> Tensor:
    """(N^S, S) every sequence of S tokens in lexicographic order."""
    grid = torch.cartesian_prod(*[torch.arange(N, device=device)] * S)
    return grid.view(N**S, S)


def sequence_index(tokens: Tensor, N: int) -> Tensor:
    """Row of each sequence in :func:`all_sequences`: tokens (..., S) → (...)."""
    weights = N ** torch.arange(tokens.shape[-1] - 1, -1, -1, device=tokens.device)
    return (tokens * weights).sum(-1)


def association_task(N: int, S: int, seed: int, device: torch.device | str = "cpu") -> Task:
    """One uniformly random next token per input: T0 = N^S associations."""
    g = torch.Generator().manual_seed(seed)
    targets = torch.randint(N, (N**S,), generator=g)
    return Task(all_sequences(N, S, device), targets.to(device), 0.0)


def distribution_task(
    N: int, S: int, seed: int, temperature: float = 1.0, device: torch.device | str = "cpu"
) -> Task:
    """A random conditional distribution with full support: π(·|t) = softmax(g_t / temperature).

    g_t has i.i.d. standard normal entries; higher temperatures give higher entropy (the
    uniform distribution as temperature → ∞, one-hot as it → 0).
    """
    g = torch.Generator().manual_seed(seed)
    probs = torch.softmax(torch.randn(N**S, N, generator=g, dtype=torch.float64) / temperature, -1)
    entropy = float(-(probs * probs.log()).sum(-1).mean())
    _logger.info(
        "distribution task N=%d S=%d T=%.3g: mean entropy %.3f nats (uniform: %.3f)",
        N,
        S,
        temperature,
        entropy,
        math.log(N),
    )
    return Task(all_sequences(N, S, device), probs.float().to(device), entropy)


def fixed_sample(task: Task, size: int, seed: int) -> Task:
    """``size`` input sequences drawn with replacement from the uniform prior, with targets.

    The authors' recipe trains on one such sample (2^14 sequences) instead of every input.
    """
    g = torch.Generator().manual_seed(seed)
    rows = torch.randint(task.inputs.shape[0], (size,), generator=g).to(task.inputs.device)
    return Task(task.inputs[rows], task.targets[rows], task.entropy)
