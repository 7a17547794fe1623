"""Assumption 2: the numerical rank of every context matrix E_t (n × d), streamed.

The rank follows the numpy / torch ``matrix_rank`` rule: singular values above
rtol·σ_max count, with rtol = max(n, d)·eps(stored dtype) by default (configurable). Contexts
are read in chunks from a (T, n, d) array — typically ``np.load(path, mmap_mode="r")`` — so
memory stays bounded by the chunk.

Singular values come from the eigenvalues of the float64 Gram matrix E Eᵀ (or Eᵀ E when
n > d), which resolve squared singular values to about r·eps64·σ_max² (r = min(n, d)). That
is far below the squared tolerance for float32 contexts; an example with an eigenvalue too
close to the squared tolerance to call (within RESOLUTION_FACTOR bands), or a tolerance that
float64 squaring cannot resolve (float64 contexts; GRAM_RESOLUTION in
:mod:`memcap.numerics.tolerance`), is recomputed with a direct float64 SVD.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch
from tqdm import tqdm

from memcap.numerics.tolerance import (
    EPS64,
    GRAM_RESOLUTION,
    RESOLUTION_FACTOR,
    matrix_rank_rtol,
)

_logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ContextRanks:
    """Per-example ranks of the context matrices.

    Attributes:
        rank: (T,) numerical rank of each E_t.
        sigma_min: (T,) its min(n, d)-th singular value (for a rank-deficient context computed
            through the Gram matrix it is only resolved down to ~√(r·eps64)·σ_max).
        sigma_max: (T,) its largest singular value.
        tolerance: (T,) the absolute threshold rtol·σ_max.
        n, d: context size and dimension.
        rtol: relative tolerance used.
        svd_checked: examples recomputed with a direct SVD.
    """

    rank: np.ndarray
    sigma_min: np.ndarray
    sigma_max: np.ndarray
    tolerance: np.ndarray
    n: int
    d: int
    rtol: float
    svd_checked: int

    @property
    def full_rank(self) -> np.ndarray:
        """Examples whose context has rank n."""
        return self.rank == self.n

    @property
    def margin_decades(self) -> np.ndarray:
        """log10(σ_min / tolerance): how far each context sits above (> 0) the tolerance."""
        with np.errstate(divide="ignore", invalid="ignore"):
            margin = np.log10(self.sigma_min) - np.log10(self.tolerance)
        return np.where(self.sigma_max > 0, margin, -np.inf)


def context_ranks(
    contexts: np.ndarray,
    *,
    rtol: float | None = None,
    chunk: int = 64,
    device: str | torch.device = "cpu",
    progress: bool = False,
) -> ContextRanks:
    """Rank, σ_min and σ_max of every context, ``chunk`` examples at a time.

    Args:
        contexts: (T, n, d) array; a memory map is read chunk by chunk.
        rtol: relative tolerance; None = max(n, d)·eps(stored dtype).
        chunk: examples per chunk (memory ≈ chunk·n·d·8 bytes, twice).
        device: torch device for the Gram matrices and eigenvalues.
        progress: show a progress bar over chunks.
    """
    if contexts.ndim != 3:
        raise ValueError(f"expected a (T, n, d) array, got shape {contexts.shape}")
    t, n, d = contexts.shape
    tau = float(rtol) if rtol is not None else matrix_rank_rtol(n, d, contexts.dtype)
    device = torch.device(device)
    out = {key: np.empty(t) for key in ("sigma_min", "sigma_max")}
    rank = np.empty(t, dtype=np.int64)
    checked = 0
    for start in tqdm(range(0, t, chunk), disable=not progress, mininterval=5, desc="contexts"):
        block = torch.from_numpy(np.array(contexts[start : start + chunk], dtype=np.float64))
        block = block.to(device)
        r, s_min, s_max, n_checked = _chunk_ranks(block, tau)
        stop = start + block.shape[0]
        rank[start:stop] = r.cpu().numpy()
        out["sigma_min"][start:stop] = s_min.cpu().numpy()
        out["sigma_max"][start:stop] = s_max.cpu().numpy()
        checked += n_checked
    if checked:
        _logger.info("%d of %d contexts re-checked with a direct SVD", checked, t)
    return ContextRanks(
        rank=rank,
        sigma_min=out["sigma_min"],
        sigma_max=out["sigma_max"],
        tolerance=tau * out["sigma_max"],
        n=n,
        d=d,
        rtol=tau,
        svd_checked=checked,
    )


def _chunk_ranks(
    block: torch.Tensor, tau: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """Ranks and extreme singular values of a (c, n, d) float64 block."""
    c, n, d = block.shape
    r = min(n, d)
    gram = block @ block.transpose(1, 2) if n <= d else block.transpose(1, 2) @ block
    lam = torch.linalg.eigvalsh(gram).clamp(min=0)  # (c, r) ascending
    lam_max = lam[:, -1]
    threshold = tau * tau * lam_max
    rank = (lam > threshold[:, None]).sum(dim=1)
    s_min, s_max = lam[:, 0].sqrt(), lam_max.sqrt()
    band = RESOLUTION_FACTOR * r * EPS64 * lam_max
    near = ((lam - threshold[:, None]).abs() <= band[:, None]).any(dim=1)
    unresolvable = threshold <= GRAM_RESOLUTION * band
    redo = torch.nonzero((near | unresolvable) & (lam_max > 0)).flatten()
    if redo.numel():
        s = torch.linalg.svdvals(block[redo])  # (m, r) descending
        rank[redo] = (s > tau * s[:, :1]).sum(dim=1)
        s_min[redo], s_max[redo] = s[:, -1], s[:, 0]
    return rank, s_min, s_max, int(redo.numel())


def rank_histogram(ranks: ContextRanks) -> dict[int, int]:
    """How many contexts have each rank."""
    values, counts = np.unique(ranks.rank, return_counts=True)
    return {int(v): int(k) for v, k in zip(values, counts, strict=True)}
