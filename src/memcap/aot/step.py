"""Paper B's training step: the model's forward and autograd's backward, the loss class-major.

:class:`AoTStep` is :class:`memcap.training.engine.AutogradStep` (``torch.compile`` with
``cfg.compile``) with one change: the cross-entropy reads the logits as the model computes
them, classes along the middle axis (R, N, B), so its passes run along the examples instead
of along a last axis of N classes (the logits are not copied into (R·B, N) rows). The same
loss as :func:`memcap.training.objectives.example_losses` up to float rounding (tested).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from memcap.training.engine import AutogradStep
from memcap.training.objectives import Objective, widened


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
