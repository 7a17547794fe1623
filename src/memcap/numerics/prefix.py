"""The prefix problem: what every ordering's search needs, and the reference decision.

For an ordering of the rows of X, m is the number of leading rows that are independent under
the tolerance (docs/kruskal.md). This module holds the data shared by all orderings, the
direct-SVD decision every route must agree with, and the bisection both routes end with.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from memcap.numerics.tolerance import BRACKET_SLACK


@dataclass(frozen=True)
class PrefixProblem:
    """Data shared by every ordering; built once per query set by :func:`prepare`.

    Attributes:
        x: (T, d) float64, scaled so the largest row norm is in [0.5, 1).
        gram: (T, T) float64 Gram matrix x xᵀ on the host, or None (then prefix Grams are
            multiplied out).
        y: (T, p) coordinates of x in its top-p right singular vectors.
        tail2: bound on σ_{p+1}(x)², the energy of x outside those p directions.
        sigma1_2: σ_1(x)², the largest squared singular value of the whole set.
        sigma2_2: σ_2(x)², an upper bound on λ_2 of every prefix Gram matrix (interlacing).
        norms2: (T,) squared row norms.
        tau2: squared relative tolerance τ².
        route: ``gram`` or ``qr``.
        search: where the Gram route searches: ``host`` (one ordering at a time, SciPy) or
            ``device`` (batched over orderings in torch on x's device).
        device_gram: the Gram matrix on x's device for the device search (the same values as
            ``gram``), or None.
    """

    x: torch.Tensor
    gram: np.ndarray | None
    y: torch.Tensor
    tail2: float
    sigma1_2: float
    sigma2_2: float
    norms2: torch.Tensor
    tau2: float
    route: str
    search: str = "host"
    device_gram: torch.Tensor | None = None


def prepare(
    x: torch.Tensor,
    singular_values: torch.Tensor,
    vh: torch.Tensor,
    tau: float,
    route: str,
    search: str = "host",
    projection_dim: int = 64,
    gram_limit_bytes: int = 2**31,
) -> PrefixProblem:
    """Precompute what every ordering needs from the scaled data ``x`` and its SVD; ``search``
    is where the Gram route searches (host or device)."""
    p = min(projection_dim, vh.shape[0])
    s1 = float(singular_values[0]) if singular_values.numel() else 0.0
    tail = float(singular_values[p]) if singular_values.numel() > p else 0.0
    tail += BRACKET_SLACK * s1
    t = x.shape[0]
    kept = route == "gram" and t * t * 8 <= gram_limit_bytes
    gram = x @ x.T if kept else None
    s2 = float(singular_values[1]) if singular_values.numel() > 1 else 0.0
    return PrefixProblem(
        x=x,
        gram=gram.cpu().numpy() if gram is not None else None,
        y=x @ vh[:p].T,
        tail2=tail * tail,
        sigma1_2=s1 * s1,
        sigma2_2=s2 * s2,
        norms2=(x * x).sum(dim=1),
        tau2=tau * tau,
        route=route,
        search=search,
        device_gram=gram if search == "device" else None,
    )


def prefix_is_independent(rows: torch.Tensor, tau: float) -> bool:
    """The reference decision: a direct float64 SVD of the rows, σ_min > τ·σ_max."""
    s = torch.linalg.svdvals(rows.to(torch.float64))
    if s.numel() < rows.shape[0] or s[0] == 0:
        return False
    return bool(s[-1] > tau * s[0])


def bisect(lo: int, hi: int, passes: Callable[[int], bool]) -> int:
    """Largest k in [lo, hi] with ``passes(k)``, given that passing is monotone and lo passes."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if passes(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo
