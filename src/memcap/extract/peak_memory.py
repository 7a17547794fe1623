"""Peak accelerator memory of a job, for provenance and the scale audit's timings."""

from __future__ import annotations

import torch


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
