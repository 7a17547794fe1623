"""Assumption 2: the numerical rank of every context matrix E_t (n × d), streamed.

The rank follows the numpy / torch ``matrix_rank`` rule: singular values above
rtol·σ_max count, with rtol = max(n, d)·eps(stored dtype) by default (configurable). Contexts
are read in chunks from a (T, n, d) array — typically ``np.load(path, mmap_mode="r")`` — so
memory stays bounded by the chunk; :class:`ContextRankStream` takes the same chunks as an
extraction produces them (same rule, same answers), and :func:`save_context_ranks` /
:func:`load_context_ranks` keep the result.

Singular values come from the eigenvalues of the float64 Gram matrix E Eᵀ (or Eᵀ E when
n > d), each within a proven band of the exact one (``gram_eigenvalue_error`` in
:mod:`memcap.numerics.tolerance`: forming the Gram matrix plus the eigensolver, about
r·(max(n, d) + 65)·eps64·σ_max², r = min(n, d)). An eigenvalue farther than the band from the
squared tolerance is on the side it is computed on; an example with an eigenvalue inside the
band (a context at the tolerance; with float64 contexts, whose tolerance lies below the band,
every rank-deficient one) is recomputed with a direct float64 SVD.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from memcap.numerics.tolerance import gram_eigenvalue_error, matrix_rank_rtol

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
    stream = ContextRankStream(n, d, rtol=rtol, dtype=contexts.dtype, device=device)
    for start in tqdm(range(0, t, chunk), disable=not progress, mininterval=5, desc="contexts"):
        stream.add(contexts[start : start + chunk])
    return stream.result()


class ContextRankStream:
    """Ranks of context matrices added chunk by chunk, e.g. as an extraction writes them.

    Args:
        n, d: context size and dimension.
        rtol: relative tolerance; None = max(n, d)·eps(``dtype``).
        dtype: the dtype the contexts are stored in (sets the default tolerance).
        device: torch device for the Gram matrices and eigenvalues.
    """

    def __init__(
        self,
        n: int,
        d: int,
        *,
        rtol: float | None = None,
        dtype: np.dtype | type = np.float32,
        device: str | torch.device = "cpu",
    ) -> None:
        self.n, self.d = n, d
        self.tau = float(rtol) if rtol is not None else matrix_rank_rtol(n, d, np.dtype(dtype))
        self.device = torch.device(device)
        self._parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._checked = 0

    def add(self, contexts: np.ndarray | torch.Tensor) -> None:
        """Rank the (c, n, d) ``contexts``, in float64 (values as stored)."""
        if isinstance(contexts, torch.Tensor):
            block = contexts.detach().to(self.device, torch.float64)
        else:
            block = torch.from_numpy(np.array(contexts, dtype=np.float64)).to(self.device)
        if tuple(block.shape[1:]) != (self.n, self.d):
            raise ValueError(f"contexts {tuple(block.shape)} are not (c, {self.n}, {self.d})")
        r, s_min, s_max, n_checked = _chunk_ranks(block, self.tau)
        self._parts.append(tuple(x.cpu().numpy() for x in (r, s_min, s_max)))
        self._checked += n_checked

    def result(self) -> ContextRanks:
        """The ranks of every context added, in order."""
        rank, s_min, s_max = (
            np.concatenate([part[i] for part in self._parts] or [np.empty(0)]) for i in range(3)
        )
        if self._checked:
            _logger.info("%d of %d contexts re-checked with a direct SVD", self._checked, len(rank))
        return ContextRanks(
            rank=rank.astype(np.int64),
            sigma_min=s_min.astype(np.float64),
            sigma_max=s_max.astype(np.float64),
            tolerance=self.tau * s_max.astype(np.float64),
            n=self.n,
            d=self.d,
            rtol=self.tau,
            svd_checked=self._checked,
        )


def save_context_ranks(path: str | Path, ranks: ContextRanks) -> None:
    """Write ``ranks`` to an ``.npz`` file (arrays and sizes)."""
    with Path(path).open("wb") as handle:
        np.savez(
            handle,
            rank=ranks.rank,
            sigma_min=ranks.sigma_min,
            sigma_max=ranks.sigma_max,
            tolerance=ranks.tolerance,
            sizes=np.array([ranks.n, ranks.d, ranks.svd_checked]),
            rtol=np.array(ranks.rtol),
        )


def load_context_ranks(path: str | Path) -> ContextRanks:
    """Inverse of :func:`save_context_ranks`."""
    with np.load(path) as data:
        n, d, checked = (int(x) for x in data["sizes"])
        return ContextRanks(
            rank=data["rank"],
            sigma_min=data["sigma_min"],
            sigma_max=data["sigma_max"],
            tolerance=data["tolerance"],
            n=n,
            d=d,
            rtol=float(data["rtol"]),
            svd_checked=checked,
        )


def _chunk_ranks(
    block: torch.Tensor, tau: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """Ranks and extreme singular values of a (c, n, d) float64 block."""
    _, n, d = block.shape
    gram = block @ block.transpose(1, 2) if n <= d else block.transpose(1, 2) @ block
    lam = torch.linalg.eigvalsh(gram).clamp(min=0)  # (c, r) ascending
    lam_max = lam[:, -1]
    threshold = tau * tau * lam_max
    rank = (lam > threshold[:, None]).sum(dim=1)
    s_min, s_max = lam[:, 0].sqrt(), lam_max.sqrt()
    band = gram_eigenvalue_error(n, d) * lam_max
    near = ((lam - threshold[:, None]).abs() <= band[:, None]).any(dim=1)
    redo = torch.nonzero(near & (lam_max > 0)).flatten()
    if redo.numel():
        s = torch.linalg.svdvals(block[redo])  # (m, r) descending
        rank[redo] = (s > tau * s[:, :1]).sum(dim=1)
        s_min[redo], s_max[redo] = s[:, -1], s[:, 0]
    return rank, s_min, s_max, int(redo.numel())


def rank_histogram(ranks: ContextRanks) -> dict[int, int]:
    """How many contexts have each rank."""
    values, counts = np.unique(ranks.rank, return_counts=True)
    return {int(v): int(k) for v, k in zip(values, counts, strict=True)}
