"""Paper A's synthetic memorization data: uniform queries and contexts, random labels.

Query and context entries are i.i.d. uniform on [0, 1]. A *random* context is drawn afresh
for every example; a *shared* ("fixed" in paper A) context is one (n, d) matrix used by every
example. Labels are uniform over C classes (classification) or uniform on [0, 1]
(regression). Everything comes from one seed. Sweeps draw one set at the largest T of their
grid and train on its first T examples (:meth:`SyntheticSet.head`): the sets are nested.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

ContextKind = Literal["random", "shared"]
Task = Literal["classification", "regression"]


@dataclass
class SyntheticSet:
    """T examples: queries (T, d), contexts (T, n, d) and targets (T,)."""

    queries: Tensor
    contexts: Tensor  # a stride-0 expanded view of one (n, d) matrix for shared contexts
    targets: Tensor  # int64 class indices, or float32 regression values

    def head(self, size: int) -> SyntheticSet:
        """The first ``size`` examples."""
        return SyntheticSet(self.queries[:size], self.contexts[:size], self.targets[:size])


def make_dataset(
    T: int,
    n: int,
    d: int,
    context: ContextKind,
    task: Task,
    classes: int,
    seed: int,
) -> SyntheticSet:
    """Draw ``T`` synthetic examples.

    Args:
        T: dataset size.
        n: context size.
        d: token dimension.
        context: "random" (one context per example) or "shared" (one for all).
        task: "classification" (labels uniform over ``classes``) or "regression" (uniform
            on [0, 1]).
        classes: C, used by classification only.
        seed: the one seed behind queries, contexts and labels.
    """
    g = torch.Generator().manual_seed(int(seed))
    queries = torch.rand(T, d, generator=g)
    if context == "shared":
        contexts = torch.rand(n, d, generator=g).expand(T, n, d)
    elif context == "random":
        contexts = torch.rand(T, n, d, generator=g)
    else:
        raise ValueError(f"unknown context kind '{context}'")
    if task == "classification":
        targets = torch.randint(classes, (T,), generator=g)
    elif task == "regression":
        targets = torch.rand(T, generator=g)
    else:
        raise ValueError(f"unknown task '{task}'")
    return SyntheticSet(queries, contexts, targets)
