"""The configured torch device, and what jobs measure on it (peak memory, synchronised
timings)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import torch


def resolve_device(name: str = "auto") -> torch.device:
    """``auto`` gives the first CUDA device when one is available, else the CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device '{name}' requested but CUDA is not available; use 'auto'")
    return device


def reset_peak_memory(device: torch.device) -> None:
    """Start counting the peak from now (a no-op off CUDA)."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory_gb(device: torch.device) -> float | None:
    """Peak memory torch allocated on ``device`` since the reset, in GB (None off CUDA)."""
    if device.type != "cuda":
        return None
    return round(torch.cuda.max_memory_allocated(device) / 1e9, 3)


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work, so that a wall-clock timing covers it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def host_pool(device: torch.device) -> ThreadPoolExecutor | None:
    """Threads for a GPU job's host-side solves, one per core it may run on (None on the CPU,
    where the job's own thread does them and its rule's ``threads`` is its whole budget)."""
    if device.type == "cpu":
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return ThreadPoolExecutor(cores or 1, thread_name_prefix="host-solve")
