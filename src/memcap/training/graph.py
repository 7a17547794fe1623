"""The training step replayed as a CUDA graph: one launch per step (``cfg.cuda_graph``).

For paper A's small models on a GPU, the kernel launches of an eager step and the Python
around them take longer than the arithmetic. :class:`GraphedUpdate` captures
:func:`~memcap.training.step.apply_update` once as a CUDA graph, with the batch indices and the
learning rate in fixed device buffers, and replays it. The graph replays the kernels that the
function launched during the capture, so eager and graphed steps compute the same numbers (the
batch draws stay outside the graph, made on the host's schedule). A capture that fails (a step
that reads the device on the host cannot be captured) falls back to eager steps with one log
line.
"""

from __future__ import annotations

import logging

import torch
from torch import Tensor

from memcap.training.config import TrainConfig
from memcap.training.data import Objective
from memcap.training.step import ActiveReplicas, EagerUpdate, Step, apply_update

_logger = logging.getLogger(__name__)

WARMUP = 3  # eager steps before a capture: Adam's state, cuBLAS's workspace, caches


class GraphedUpdate(EagerUpdate):
    """:func:`apply_update` captured once as a CUDA graph after :data:`WARMUP` eager steps,
    then replayed with the step's batch indices and learning rate copied into its buffers.
    Captured anew when the active replicas change (replicas leaving)."""

    def __init__(
        self, active: ActiveReplicas, step: Step, objective: Objective, cfg: TrainConfig
    ) -> None:
        super().__init__(active, step, objective, cfg)
        self._graph: torch.cuda.CUDAGraph | None = None
        self._version = -1  # the active set the graph and the eager count belong to
        self._eager = 0
        self._failed = False
        self._index: Tensor | None = None
        self._lr = torch.zeros((), device=active.index.device)
        self._out: tuple[Tensor, Tensor, Tensor] | None = None

    def __call__(self, lr: float) -> tuple[Tensor, Tensor, Tensor]:
        if self._failed:
            return super().__call__(lr)
        if self.active.version != self._version:
            self._version, self._graph, self._out, self._eager = self.active.version, None, None, 0
        if self._graph is None:
            if self._eager < WARMUP:
                self._eager += 1
                return self._on_side_stream(lr)
            self._capture()
            if self._failed:
                return super().__call__(lr)
        index = self.active.draw()
        if index is not None:
            self._index.copy_(index)
        self._lr.fill_(lr)
        self._graph.replay()
        return self._out

    def _on_side_stream(self, lr: float) -> tuple[Tensor, Tensor, Tensor]:
        """An eager step on a side stream, as CUDA graphs want their warm-up."""
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            out = EagerUpdate.__call__(self, lr)
        torch.cuda.current_stream().wait_stream(side)
        return out

    def _capture(self) -> None:
        active = self.active
        self._index = (
            None
            if active.stream is None
            else torch.zeros(
                (active.data.replicas, self.batch_size), dtype=torch.long, device=self._lr.device
            )
        )
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                self._out = apply_update(
                    active, self.step, self.objective, self.batch_size, self._index, self._lr
                )
        except RuntimeError as error:  # a host read of the device inside the step, say
            self._failed = True
            _logger.info("CUDA graph capture failed (%s): eager steps", str(error).splitlines()[0])
            return
        self._graph = graph
        _logger.info("training step captured as a CUDA graph (%d replicas)", active.data.replicas)
