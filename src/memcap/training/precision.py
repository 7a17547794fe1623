"""The arithmetic of a training step: float32, TF32 matmuls or bfloat16 compute.

- ``float32``: the model as it is.
- ``tf32``: float32 tensors, matmuls in TF32 on CUDA (``torch.set_float32_matmul_precision
  ("high")``, which sets ``torch.backends.cuda.matmul.allow_tf32``) while training runs; the
  previous setting is restored after. No effect elsewhere (logged): the CPU keeps float32,
  so its results do not change.
- ``bf16``: forward and backward run on a bfloat16 copy of the model (:class:`ComputeCopy`);
  its gradients go back to the float32 master weights, which float32 Adam updates. This is
  what ``torch.autocast`` with float32 master weights does for matmuls, done by copy instead:
  every operation of the model's forward and backward runs in bfloat16, not only those on
  autocast's lists. The loss is taken in float32 from the model's outputs.

Evaluations (memorized counts, the kept state) always run on the float32 master weights.

Whatever the precision, training flushes subnormal floats to zero on the CPU
(:func:`subnormals_flushed`): as gradients and attention weights fade late in training,
subnormal values (below 1.2·10⁻³⁸ in float32 and bfloat16) make the CPU's arithmetic tens of
times slower, and they move no weight: Adam's update of a parameter from such a gradient is
below that parameter's own rounding.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Iterator

import torch
from torch import Tensor, nn

from memcap.training.config import Precision

_logger = logging.getLogger(__name__)


@contextlib.contextmanager
def matmul_precision(precision: Precision, device: torch.device) -> Iterator[None]:
    """TF32 matmuls on CUDA while the block runs when ``precision`` is "tf32"."""
    if precision != "tf32":
        yield
        return
    if device.type != "cuda":
        _logger.info("precision tf32 has no effect on %s: training stays float32", device.type)
        yield
        return
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


@contextlib.contextmanager
def subnormals_flushed() -> Iterator[None]:
    """Subnormal floats read and written as zero on the CPU (x86 FTZ/DAZ) while the block
    runs; the default (kept) after."""
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)


class ComputeCopy:
    """A bfloat16 copy of a float32 model that runs the training step's forward and backward.

    Args:
        model: the float32 master model; its parameters keep every update.
    """

    dtype = torch.bfloat16

    def __init__(self, model: nn.Module) -> None:
        self.model = copy.deepcopy(model).to(self.dtype)
        self._masters = list(model.parameters())
        self._copies = list(self.model.parameters())
        self._last: tuple[tuple[Tensor, ...], tuple[Tensor, ...]] | None = None

    @torch.no_grad()
    def pull(self) -> None:
        """Round the master weights into the copy (before a forward)."""
        torch._foreach_copy_(self._copies, self._masters)

    def push_gradients(self) -> None:
        """Hand the copy's gradients to the masters as float32 (after a backward)."""
        for master, own in zip(self._masters, self._copies, strict=True):
            master.grad = None if own.grad is None else own.grad.float()
            own.grad = None

    def inputs(self, inputs: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        """Floating-point inputs in bfloat16; indices stay as they are. The same input
        tensors (full batches) get the same cast tensors back, so caches keyed on them hold."""
        if self._last is not None and all(
            a is b for a, b in zip(self._last[0], inputs, strict=True)
        ):
            return self._last[1]
        cast = tuple(x.to(self.dtype) if x.is_floating_point() else x for x in inputs)
        self._last = (inputs, cast)
        return cast
