"""Resolve the configured torch device."""

from __future__ import annotations

import torch


def resolve_device(name: str = "auto") -> torch.device:
    """``auto`` gives the first CUDA device when one is available, else the CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device '{name}' requested but CUDA is not available; use 'auto'")
    return device
