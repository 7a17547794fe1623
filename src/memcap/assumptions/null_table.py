"""The random null kept on disk, one file per key and size, shared by the check jobs.

The null (:mod:`memcap.numerics.null`) depends only on T, d, dtype, scaling, the orderings
(S, seed) and k, so every job deciding a set of the same shape reads the same table: the
first writes it (to a temporary name, then renamed: a job that computes it at the same time
writes the same values).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from memcap.numerics.band import NullSource, cached_null
from memcap.numerics.null import NullKey
from memcap.numerics.ratios import PrefixRatios


def null_source(folder: str | Path | None) -> NullSource:
    """A null source that reads and writes ``folder`` (None: this process only)."""

    def source(key: NullKey, sizes: Sequence[int]) -> dict[int, PrefixRatios]:
        if folder is None:
            return cached_null(key, sizes)
        root = Path(folder)
        found = {k: _read(root / f"{key.name}_k{k}.npz") for k in sizes}
        missing = [k for k, value in found.items() if value is None]
        computed = cached_null(key, missing)
        root.mkdir(parents=True, exist_ok=True)
        for k, ratios in computed.items():
            _write(root / f"{key.name}_k{k}.npz", ratios)
        return {k: v for k, v in found.items() if v is not None} | computed

    return source


def _read(path: Path) -> PrefixRatios | None:
    """The stored null, or None when absent or written in an older layout (then recomputed)."""
    if not path.exists():
        return None
    with np.load(path) as data:
        if not {"k", "ratio", "concentration", "censored", "svd"} <= set(data.files):
            return None
        return PrefixRatios(
            int(data["k"]), data["ratio"], data["concentration"], data["censored"], int(data["svd"])
        )


def _write(path: Path, ratios: PrefixRatios) -> None:
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    with partial.open("wb") as handle:
        np.savez(
            handle, k=ratios.k, ratio=ratios.ratio, concentration=ratios.concentration,
            censored=ratios.censored, svd=ratios.svd,
        )  # fmt: skip
    partial.replace(path)
