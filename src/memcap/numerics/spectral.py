"""The spectral cap: the largest k for which the spectrum of the whole set leaves some
k-subset possibly independent; every larger subset is provably dependent."""

from __future__ import annotations

import torch

from memcap.numerics.tolerance import BRACKET_SLACK


def spectral_cap(x: torch.Tensor, singular: torch.Tensor, vh: torch.Tensor, tau: float) -> int:
    """Largest k not excluded by the spectrum: for larger k every k-subset is dependent.

    Any k-subset A has σ_k(A) ≤ σ_k(X) (interlacing) and σ_max(A) ≥ L_k, the larger of its
    k-th smallest row norm and ‖A v₁‖ over the k smallest projections on X's top singular
    vector. So σ_k(X) ≤ τ·L_k proves every k-subset dependent.

    Args:
        x: (T, d) float64 set.
        singular: its singular values, descending.
        vh: its right singular vectors (rows).
        tau: relative tolerance.
    """
    t, d = x.shape
    kmax = min(t, d)
    norms = torch.sort(torch.linalg.vector_norm(x, dim=1)).values
    proj = torch.sort((x @ vh[0]) ** 2).values
    lower = torch.maximum(norms[:kmax], torch.sqrt(torch.cumsum(proj, 0)[:kmax]))
    slack = BRACKET_SLACK * float(singular[0]) if singular.numel() else 0.0
    excluded = torch.nonzero(singular[:kmax] + slack <= tau * lower).flatten()
    return int(excluded[0]) if excluded.numel() else kmax
