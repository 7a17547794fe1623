"""Seeds of both papers' experiments, all derived from the config's global seed."""

from __future__ import annotations

import numpy as np


def replicate_seeds(base_seed: int, count: int) -> list[int]:
    """The ``count`` replicate seeds of a setting: ``1000 · base_seed + k``, k = 0 … count − 1.

    A replicate seed labels one repetition in the result tables; with base seed 0 they are
    0, 1, ….
    """
    return [int(base_seed) * 1000 + k for k in range(count)]


def derive_seed(*parts: int | str) -> int:
    """A 63-bit seed determined by ``parts`` (ints or strings), independent across parts."""
    words = [p if isinstance(p, int) else int.from_bytes(p.encode(), "little") for p in parts]
    return int(np.random.SeedSequence(words).generate_state(2, np.uint32).view(np.uint64)[0] >> 1)
