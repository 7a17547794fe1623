"""Training sets of R replicas, padded to a common size, as the training loop reads them."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class ReplicaData:
    """Training sets of R replicas, padded to a common size.

    Attributes:
        inputs: tensors of shape (R, T_max, ...) passed to the model, indexed per example.
        targets: (R, T_max) class indices or regression values, or (R, T_max, C)
            target distributions.
        sizes: (R,) number of valid examples of each replica (the first ``sizes[r]`` rows).
    """

    inputs: tuple[Tensor, ...]
    targets: Tensor
    sizes: Tensor

    @property
    def replicas(self) -> int:
        return int(self.sizes.shape[0])

    def mask(self) -> Tensor:
        """(R, T_max) True where the example is valid."""
        t_max = self.targets.shape[1]
        return torch.arange(t_max, device=self.sizes.device)[None, :] < self.sizes[:, None]

    def take(self, index: Tensor) -> tuple[tuple[Tensor, ...], Tensor]:
        """Inputs and targets at per-replica example indices ``index`` of shape (R, B)."""
        return tuple(gather_rows(x, index) for x in self.inputs), gather_rows(self.targets, index)

    def select(self, replicas: Tensor) -> ReplicaData:
        """The training sets of replicas ``replicas`` (positions along the replica axis)."""
        return ReplicaData(
            tuple(x.index_select(0, replicas) for x in self.inputs),
            self.targets.index_select(0, replicas),
            self.sizes.index_select(0, replicas),
        )


def gather_rows(x: Tensor, index: Tensor) -> Tensor:
    """Rows ``index`` (R, B) of ``x`` (R, T, ...) → (R, B, ...)."""
    expanded = index.view(*index.shape, *([1] * (x.dim() - 2))).expand(*index.shape, *x.shape[2:])
    return torch.gather(x, 1, expanded)
