"""Mini-batch example indices of replica-batched training, one random stream per replica."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from memcap.training.config import Sampling

BLOCK = 64  # steps of draws with replacement made at once per replica


def replica_generators(seeds: Sequence[int], device: torch.device) -> list[torch.Generator]:
    """One generator per replica, so a replica's random stream does not depend on R."""
    return [torch.Generator(device=device).manual_seed(int(s)) for s in seeds]


class BatchStream:
    """Endless (R, batch) example indices: drawn with replacement, or shuffled epochs.

    Shuffled epochs (the authors' ``DataLoader(shuffle=True)``) cut one permutation of each
    replica's examples into size // batch batches (a remainder is dropped); replicas must
    share one size. Each replica draws from its own generator, so :meth:`keep` (replicas
    leaving) leaves the others' streams as they were.

    Args:
        sizes: each replica's number of examples.
        batch: examples per replica and step.
        sampling: "replacement" or "shuffle".
        generators: one per replica.
    """

    def __init__(
        self,
        sizes: Sequence[int],
        batch: int,
        sampling: Sampling,
        generators: list[torch.Generator],
    ) -> None:
        if sampling == "shuffle" and len(set(sizes)) > 1:
            raise ValueError("shuffled epochs need replicas of one dataset size")
        self.sizes = [int(s) for s in sizes]  # host ints: no device sync per step
        self.batch, self.sampling, self.generators = batch, sampling, list(generators)
        self._order: Tensor | None = None  # this epoch's permutations (shuffle)
        self._start = 0
        self._drawn: Tensor | None = None  # (R, BLOCK, batch): the next steps' draws
        self._step = 0

    def next(self) -> Tensor:
        """The next step's (R, batch) indices into each replica's own examples."""
        if self.sampling == "replacement":
            return self._with_replacement()
        size = self.sizes[0]
        if self._order is None or self._start + self.batch > size:
            self._order = torch.stack(
                [torch.randperm(size, generator=g, device=g.device) for g in self.generators]
            )
            self._start = 0
        batch = self._order[:, self._start : self._start + self.batch]
        self._start += self.batch
        return batch

    def peek(self) -> Tensor:
        """The indices :meth:`next` returns next, without moving the stream (the generators
        draw what the next step would draw, once)."""
        batch = self.next()
        if self.sampling == "replacement":
            self._step -= 1
        else:
            self._start -= self.batch
        return batch

    def _with_replacement(self) -> Tensor:
        """Draws with replacement, BLOCK steps at a time: one launch per replica per block
        instead of per step (a step of a small model is bound by such launches). A CPU
        generator draws the same numbers either way; a CUDA generator's Philox offsets
        advance per call, so there the block is a different, equally uniform stream."""
        if self._drawn is None or self._step == self._drawn.shape[1]:
            self._drawn = torch.stack(
                [
                    torch.randint(size, (BLOCK, self.batch), generator=g, device=g.device)
                    for size, g in zip(self.sizes, self.generators, strict=True)
                ]
            )
            self._step = 0
        self._step += 1
        return self._drawn[:, self._step - 1]

    def keep(self, index: Sequence[int]) -> None:
        """Keep the streams of replicas ``index`` (positions among the current ones)."""
        self.sizes = [self.sizes[i] for i in index]
        self.generators = [self.generators[i] for i in index]
        if self._order is not None:
            self._order = self._order[list(index)]
        if self._drawn is not None:
            self._drawn = self._drawn[list(index)]
