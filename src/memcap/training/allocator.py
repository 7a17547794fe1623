"""The C library's allocator tuned for training loops that reuse the same tensors every step."""

from __future__ import annotations

import ctypes
import sys


def keep_freed_memory() -> None:
    """Let glibc's malloc keep freed memory for reuse instead of returning it to the system.

    A training step allocates and frees the same few tensors of up to a few MB thousands of
    times. By default glibc serves blocks that large with ``mmap`` and gives them back on free
    (or trims the heap top), so every step would fault its pages in again, the kernel
    zeroing pages at every step. Process-wide; called by
    :func:`~memcap.training.loop.train_replicas`; a no-op where the C library has no
    ``mallopt``.
    """
    if not sys.platform.startswith("linux"):
        return
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:
        return
    m_trim_threshold, m_mmap_threshold = -1, -3
    mallopt(m_mmap_threshold, 32 * 2**20)  # glibc's largest; bigger blocks still use mmap
    mallopt(m_trim_threshold, 2**30)
