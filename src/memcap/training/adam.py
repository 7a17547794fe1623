"""Adam through PyTorch's fused kernel, without ``torch.optim``.

The same update as ``torch.optim.Adam(params, lr, fused=True)`` (betas 0.9 and 0.999, eps
1e-8, no weight decay; the state of a parameter starts at its first gradient): the same
kernel with the same arguments, so the same numbers. Why not ``torch.optim``: its first
optimizer imports ``torch._dynamo`` (seconds of CPU time in every training job) and its
``step`` wraps the one kernel call in Python bookkeeping that is the main cost of a small
model's step.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn


class FusedAdam:
    """Adam on ``params``; :meth:`step` takes the learning rate of that step.

    Args:
        params: the parameters to update (floating point, all on one device).
    """

    betas = (0.9, 0.999)
    eps = 1e-8

    def __init__(self, params: Iterable[nn.Parameter]) -> None:
        self.params = list(params)
        self.exp_avg: list[torch.Tensor | None] = [None] * len(self.params)
        self.exp_avg_sq: list[torch.Tensor | None] = [None] * len(self.params)
        self.steps: list[torch.Tensor | None] = [None] * len(self.params)

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self, lr: float | torch.Tensor) -> None:
        """One update of every parameter that has a gradient, at rate ``lr`` (a 0-d tensor on
        the parameters' device: read when the kernel runs, as a captured CUDA graph needs)."""
        live = [i for i, p in enumerate(self.params) if p.grad is not None]
        for i in live:
            if self.steps[i] is None:
                p = self.params[i]
                self.steps[i] = torch.zeros((), dtype=torch.float32, device=p.device)
                self.exp_avg[i] = torch.zeros_like(p, memory_format=torch.preserve_format)
                self.exp_avg_sq[i] = torch.zeros_like(p, memory_format=torch.preserve_format)
        if not live:
            return
        steps = [self.steps[i] for i in live]
        torch._foreach_add_(steps, 1)
        torch._fused_adam_(
            [self.params[i] for i in live],
            [self.params[i].grad for i in live],
            [self.exp_avg[i] for i in live],
            [self.exp_avg_sq[i] for i in live],
            [],
            steps,
            amsgrad=False,
            lr=lr,
            beta1=self.betas[0],
            beta2=self.betas[1],
            weight_decay=0.0,
            eps=self.eps,
            maximize=False,
            grad_scale=None,
            found_inf=None,
        )

    def selected(self, params: list[nn.Parameter], index: torch.Tensor) -> FusedAdam:
        """An optimizer on ``params`` (this one's parameters with only the replicas ``index``
        kept along axis 0) carrying those replicas' moments and step counts."""
        kept = FusedAdam(params)
        for i, steps in enumerate(self.steps):
            if steps is not None:
                kept.steps[i] = steps.clone()
                kept.exp_avg[i] = self.exp_avg[i].index_select(0, index)
                kept.exp_avg_sq[i] = self.exp_avg_sq[i].index_select(0, index)
        return kept
