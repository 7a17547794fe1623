"""Where extraction stores one layer, and how it writes large float32 arrays.

A model's extraction fills one folder, one subfolder per layer (:class:`ExtractOutputs`).
Arrays go to ``.npy`` files in chunks, with bounded memory: each file is created with
:func:`numpy.lib.format.open_memmap` (so it is an ordinary ``.npy`` that readers open with
``np.load(path, mmap_mode="r")``); every chunk is written through a fresh mapping that is
closed straight after, so written pages do not pile up in the process's resident memory as T
grows. A GPU job hands its chunks to :class:`OrderedWrites`, which writes them in order on one
background thread while the next batch runs.
"""

from __future__ import annotations

import hashlib
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class ExtractOutputs:
    """Paths one job writes for one layer."""

    queries: Path  # (T, d) float32
    contexts: Path | None  # (T, n, d) float32; None: not stored (a depth row)
    provenance: Path
    context_ranks: Path | None = None  # Assumption 2's ranks, streamed (None: not computed)

    @classmethod
    def in_folder(cls, root: str | Path, layer: str, contexts: bool = True) -> ExtractOutputs:
        """The files of ``layer`` in a model's folder ``root`` (results/extract/{model}/):
        ``{layer}/queries.npy``, ``contexts.npy`` (unless not stored), ``provenance.json`` and
        ``context_ranks.npz``."""
        folder = Path(root) / layer
        return cls(
            queries=folder / "queries.npy",
            contexts=folder / "contexts.npy" if contexts else None,
            provenance=folder / "provenance.json",
            context_ranks=folder / "context_ranks.npz",
        )


class ChunkedArrayWriter:
    """Fill a ``.npy`` file of a known shape front to back, one chunk of rows at a time."""

    def __init__(self, path: str | Path, shape: tuple[int, ...], dtype: str = "float32") -> None:
        self.path = Path(path)
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.rows_written = 0
        self._digest = hashlib.sha256()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        header = np.lib.format.open_memmap(self.path, mode="w+", dtype=self.dtype, shape=shape)
        del header  # unmapped: only the header and a sparse file exist now

    def write(self, chunk: np.ndarray) -> None:
        """Append ``chunk`` (rows, *shape[1:]) after the rows already written."""
        chunk = np.ascontiguousarray(chunk, dtype=self.dtype)
        if chunk.shape[1:] != self.shape[1:]:
            raise ValueError(f"chunk shape {chunk.shape} does not fit array shape {self.shape}")
        end = self.rows_written + len(chunk)
        if end > self.shape[0]:
            raise ValueError(f"{end} rows exceed the array's {self.shape[0]}")
        array = np.lib.format.open_memmap(self.path, mode="r+")
        array[self.rows_written : end] = chunk
        array.flush()
        del array
        self._digest.update(memoryview(chunk).cast("B"))  # contiguous: hashed in place
        self.rows_written = end

    def close(self) -> str:
        """Check that every row was written; return the SHA-256 of the array's data."""
        if self.rows_written != self.shape[0]:
            raise ValueError(f"{self.path}: wrote {self.rows_written} of {self.shape[0]} rows")
        return self._digest.hexdigest()


class OrderedWrites:
    """Chunk writes in the order given: on one background thread, at most ``max_bytes`` of
    chunks waiting (``background``), or at once on the caller's thread."""

    def __init__(self, background: bool, max_bytes: int = 2**31) -> None:
        self._thread = ThreadPoolExecutor(1, "chunk-writes") if background else None
        self._pending: deque[tuple[Future, int]] = deque()
        self._bytes = 0
        self.max_bytes = max_bytes

    def write(self, writer: ChunkedArrayWriter, chunk: np.ndarray) -> None:
        """``writer.write(chunk)``, now or queued behind the earlier writes."""
        if self._thread is None:
            writer.write(chunk)
            return
        while self._pending and self._bytes + chunk.nbytes > self.max_bytes:
            self._settle()
        self._pending.append((self._thread.submit(writer.write, chunk), chunk.nbytes))
        self._bytes += chunk.nbytes

    def wait(self) -> None:
        """Wait for every queued write (raising the first error) and stop the thread."""
        while self._pending:
            self._settle()
        if self._thread is not None:
            self._thread.shutdown()

    def _settle(self) -> None:
        done, size = self._pending.popleft()
        done.result()
        self._bytes -= size
