"""Assumption 2: the numerical rank of every context matrix E_t (n × d), streamed.

The rank follows the numpy / torch ``matrix_rank`` rule: singular values above
rtol·σ_max count, with rtol = max(n, d)·eps(stored dtype) by default (configurable), taken by
default on each context equilibrated (:mod:`memcap.numerics.equilibrate`: its rows and its
coordinates scaled so that the decision does not depend on units; a context's rank is a
property of that matrix alone, so its own balance is the invariant one), and beside it on the
stored values (``raw``, paper A's rule). Every context also counts its exact proofs of rank
deficiency: rows equal to an earlier row, and zero rows. Contexts
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
every rank-deficient one) is recomputed with a direct float64 SVD; so is, on the deciding
scaling, every context not clearly a decade above the tolerance, whose σ_min then places it in
the band of :mod:`memcap.numerics.band`.

Where the work runs: the Gram matrices (and the balance) on the contexts' device (on the CPU
through NumPy, whose BLAS multiplies these float64 blocks about twice as fast as torch's on
this project's machines); the eigenvalues (NumPy's LAPACK) and the direct SVDs on the host. On
a GPU, torch's batched ``eigvalsh`` of matrices larger than 32 × 32 loops one cuSOLVER
``syevd`` per matrix (about a millisecond of kernel launches each, pytorch/pytorch#174674 and
#175585), so a GPU extraction ranked one context per millisecond with the host thread launching
and the GPU idle; the host solves the same n × n Gram matrices in about 0.3 ms of one core, on
a pool of threads while the GPU runs the next batch (``pool``). The decisions are the same
wherever the Gram matrices are formed: every eigenvalue is within the proven band, and a
context within it takes the SVD.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import deque
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from memcap.numerics.band import BAND_FACTOR
from memcap.numerics.equilibrate import check_scaling, scaled_for_rank
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
        scaling: equilibrate or none (the values the decision was taken on).
        repeated_rows: (T,) rows of each context equal to an earlier row (bitwise, as stored).
        zero_rows: (T,) zero rows of each context.
        raw: the same contexts decided on the stored values (paper A's rule), when
            ``scaling`` is equilibrate.
    """

    rank: np.ndarray
    sigma_min: np.ndarray
    sigma_max: np.ndarray
    tolerance: np.ndarray
    n: int
    d: int
    rtol: float
    svd_checked: int
    scaling: str = "none"
    repeated_rows: np.ndarray | None = None
    zero_rows: np.ndarray | None = None
    raw: ContextRanks | None = None

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
    scaling: str = "equilibrate",
    chunk: int = 64,
    device: str | torch.device = "cpu",
    progress: bool = False,
) -> ContextRanks:
    """Rank, σ_min and σ_max of every context, ``chunk`` examples at a time.

    Args:
        contexts: (T, n, d) array; a memory map is read chunk by chunk.
        rtol: relative tolerance; None = max(n, d)·eps(stored dtype).
        scaling: equilibrate (default; each context balanced first, ``raw`` beside it) or
            none (the stored values only).
        chunk: examples per chunk (memory ≈ chunk·n·d·8 bytes, twice).
        device: torch device for the Gram matrices and eigenvalues.
        progress: show a progress bar over chunks.
    """
    if contexts.ndim != 3:
        raise ValueError(f"expected a (T, n, d) array, got shape {contexts.shape}")
    t, n, d = contexts.shape
    stream = ContextRankStream(
        n, d, rtol=rtol, scaling=scaling, dtype=contexts.dtype, device=device
    )
    for start in tqdm(range(0, t, chunk), disable=not progress, mininterval=5, desc="contexts"):
        stream.add(contexts[start : start + chunk])
    return stream.result()


class ContextRankStream:
    """Ranks of context matrices added chunk by chunk, e.g. as an extraction writes them.

    Args:
        n, d: context size and dimension.
        rtol: relative tolerance; None = max(n, d)·eps(``dtype``).
        scaling: equilibrate (each context balanced; the stored values' ranks kept as
            ``raw``) or none.
        dtype: the dtype the contexts are stored in (sets the default tolerance).
        device: torch device for the balance and the Gram matrices.
        pool: threads for the host's eigenvalues and SVDs (None: the calling thread, at once);
            at most ``MAX_PENDING`` chunks per stream wait for it, holding their device blocks.
    """

    MAX_PENDING = 2

    def __init__(
        self,
        n: int,
        d: int,
        *,
        rtol: float | None = None,
        scaling: str = "equilibrate",
        dtype: np.dtype | type = np.float32,
        device: str | torch.device = "cpu",
        pool: Executor | None = None,
    ) -> None:
        self.n, self.d = n, d
        self.tau = float(rtol) if rtol is not None else matrix_rank_rtol(n, d, np.dtype(dtype))
        self.scaling = check_scaling(scaling)
        self.device = torch.device(device)
        self.pool = pool
        self._parts: list[Future | tuple[np.ndarray, ...]] = []
        self._pending: deque[Future] = deque()
        self._raw = (
            ContextRankStream(n, d, rtol=self.tau, scaling="none", device=device, pool=pool)
            if scaling != "none"
            else None
        )

    def add(self, contexts: np.ndarray | torch.Tensor) -> None:
        """Rank the (c, n, d) ``contexts``, in float64 (values as stored, or balanced)."""
        if isinstance(contexts, torch.Tensor):
            stored = contexts.detach().to(self.device)
        else:
            stored = torch.from_numpy(np.array(contexts)).to(self.device)  # a writable copy
        if tuple(stored.shape[1:]) != (self.n, self.d):
            raise ValueError(f"contexts {tuple(stored.shape)} are not (c, {self.n}, {self.d})")
        defects = tuple(x.cpu().numpy() for x in exact_row_defects(stored))  # shared with raw
        if self._raw is not None:
            self._raw._rank(scaled_for_rank(stored, "none"), defects)
        self._rank(scaled_for_rank(stored, self.scaling), defects)

    def _rank(self, block: torch.Tensor, defects: tuple[np.ndarray, ...]) -> None:
        """Form the Gram matrices of a float64 block here; solve them on the host."""
        gram = gram_matrices(block).cpu()
        band = self.scaling != "none"
        if self.pool is None:
            self._parts.append(host_ranks(gram, block, self.tau, band) + defects)
            return
        while len(self._pending) >= self.MAX_PENDING:
            self._pending.popleft().result()
        part = self.pool.submit(lambda: host_ranks(gram, block, self.tau, band) + defects)
        self._pending.append(part)
        self._parts.append(part)

    def result(self) -> ContextRanks:
        """The ranks of every context added, in order."""
        parts = [p.result() if isinstance(p, Future) else p for p in self._parts]
        rank, s_min, s_max, checked, repeated, zero = (
            np.concatenate([part[i] for part in parts] or [np.empty(0)]) for i in range(6)
        )
        n_checked = int(checked.sum())
        if n_checked:
            _logger.info("%d of %d contexts re-checked with a direct SVD", n_checked, len(rank))
        return ContextRanks(
            rank=rank.astype(np.int64),
            sigma_min=s_min.astype(np.float64),
            sigma_max=s_max.astype(np.float64),
            tolerance=self.tau * s_max.astype(np.float64),
            n=self.n,
            d=self.d,
            rtol=self.tau,
            svd_checked=n_checked,
            scaling=self.scaling,
            repeated_rows=repeated.astype(np.int64),
            zero_rows=zero.astype(np.int64),
            raw=self._raw.result() if self._raw is not None else None,
        )


_ARRAYS = ("rank", "sigma_min", "sigma_max", "tolerance", "repeated_rows", "zero_rows")


def save_context_ranks(path: str | Path, ranks: ContextRanks) -> None:
    """Write ``ranks`` (and its ``raw`` twin, keys prefixed ``raw_``) to an ``.npz`` file."""
    arrays = _npz_arrays(ranks, "")
    if ranks.raw is not None:
        arrays |= _npz_arrays(ranks.raw, "raw_")
    with Path(path).open("wb") as handle:
        np.savez(handle, **arrays)


def load_context_ranks(path: str | Path) -> ContextRanks:
    """Inverse of :func:`save_context_ranks`."""
    with np.load(path) as data:
        arrays = dict(data)
    raw = _from_npz(arrays, "raw_") if "raw_rank" in arrays else None
    return dataclasses.replace(_from_npz(arrays, ""), raw=raw)


def _npz_arrays(ranks: ContextRanks, prefix: str) -> dict[str, np.ndarray]:
    arrays = {name: getattr(ranks, name) for name in _ARRAYS if getattr(ranks, name) is not None}
    arrays["sizes"] = np.array([ranks.n, ranks.d, ranks.svd_checked])
    arrays["rtol"] = np.array(ranks.rtol)
    arrays["scaling"] = np.array(ranks.scaling)
    return {prefix + name: value for name, value in arrays.items()}


def _from_npz(arrays: dict[str, np.ndarray], prefix: str) -> ContextRanks:
    n, d, checked = (int(x) for x in arrays[prefix + "sizes"])
    return ContextRanks(
        **{name: arrays.get(prefix + name) for name in _ARRAYS},
        n=n,
        d=d,
        rtol=float(arrays[prefix + "rtol"]),
        svd_checked=checked,
        scaling=str(arrays.get(prefix + "scaling", "none")),
    )


def exact_row_defects(block: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per (n, d) context of a (c, n, d) block: rows equal to an earlier row, and zero rows.

    Either proves the context rank-deficient whatever the tolerance (compared as stored). One
    ``torch.unique`` over the block's rows numbers the distinct rows; a context's distinct
    rows are its distinct (context, number) pairs.
    """
    c, n, d = block.shape
    zero = (block == 0).all(dim=-1).sum(dim=-1)  # (c,)
    _, number = torch.unique(block.reshape(c * n, d), dim=0, return_inverse=True)  # (c·n,)
    context = torch.arange(c, device=block.device).repeat_interleave(n)
    pairs = torch.unique(context * (c * n) + number)
    distinct = torch.bincount(pairs // (c * n), minlength=c)
    return n - distinct, zero


def gram_matrices(block: torch.Tensor) -> torch.Tensor:
    """The (c, r, r) Gram matrices of a (c, n, d) block, r = min(n, d): E Eᵀ, or Eᵀ E (on
    the CPU through NumPy's BLAS, which multiplies these float64 blocks about twice as fast
    as torch's here: benchmarks/bench_equilibrate.py)."""
    _, n, d = block.shape
    if block.device.type == "cpu":
        e = block.numpy()
        t = e.transpose(0, 2, 1)
        return torch.from_numpy(e @ t if n <= d else t @ e)
    return block @ block.transpose(1, 2) if n <= d else block.transpose(1, 2) @ block


def host_ranks(
    gram: torch.Tensor, block: torch.Tensor, tau: float, band: bool = False
) -> tuple[np.ndarray, ...]:
    """Ranks, extreme singular values and SVD flags of a block from its Gram matrices (on the
    host), each context within the proven band of the tolerance re-checked with a direct SVD;
    with ``band``, every context not clearly a decade above the tolerance too."""
    _, n, d = block.shape
    lam = torch.from_numpy(np.linalg.eigvalsh(gram.numpy())).clamp(min=0)  # (c, r) ascending
    lam_max = lam[:, -1]
    threshold = tau * tau * lam_max
    rank = (lam > threshold[:, None]).sum(dim=1)
    s_min, s_max = lam[:, 0].sqrt(), lam_max.sqrt()
    error = gram_eigenvalue_error(n, d) * lam_max
    near = ((lam - threshold[:, None]).abs() <= error[:, None]).any(dim=1)
    if band:
        near |= lam[:, 0] <= (BAND_FACTOR * tau) ** 2 * lam_max + error
    redo = torch.nonzero(near & (lam_max > 0)).flatten()
    if redo.numel():
        s = torch.linalg.svdvals(block[redo.to(block.device)].to(gram.device))  # (m, r) desc.
        rank[redo] = (s > tau * s[:, :1]).sum(dim=1)
        s_min[redo], s_max[redo] = s[:, -1], s[:, 0]
    checked = torch.zeros_like(rank)
    checked[redo] = 1
    return tuple(x.cpu().numpy() for x in (rank, s_min, s_max, checked))


def rank_histogram(ranks: ContextRanks) -> dict[int, int]:
    """How many contexts have each rank."""
    values, counts = np.unique(ranks.rank, return_counts=True)
    return {int(v): int(k) for v, k in zip(values, counts, strict=True)}
