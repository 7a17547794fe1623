"""Kruskal-rank profile of a set of query vectors: P(k) for every k from one pass.

P(k) is the fraction of uniformly random k-subsets of the T queries that are linearly
independent. The first k entries of a uniformly random ordering form a uniformly random
k-subset, so for each of S sampled orderings we find m, the number of leading vectors that are
independent (:mod:`memcap._prefix_rank`), and P(k) = #{m ≥ k} / S for every k at once.

Independence is numerical: a k × d set is independent when σ_min > rtol·σ_max, with the
numpy / torch ``matrix_rank`` rule rtol = max(k, d)·eps(stored dtype) by default (for k ≤ d
that is d·eps). Decisions agree with a direct float64 SVD of the same subset.

What S samples can and cannot say: P(k) = 1 over S orderings bounds the fraction of dependent
k-subsets below 1 − (1 − level)^(1/S) (≈ 3/S at 95%), but never proves Kruskal rank ≥ k.
Exact statements come from certificates: a zero vector (Kruskal rank 0), a dependent pair
(duplicates, near-duplicates: rank ≤ 1; checked over all pairs, so their absence proves rank
≥ 2), a dependent subset met while sampling, or the spectrum of the whole set (σ_k(X) below
the tolerance of every k-subset makes every k-subset dependent).
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import sys
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import torch
from scipy import stats
from threadpoolctl import threadpool_limits
from tqdm import tqdm

from memcap import _prefix_rank, _shifted_search

_logger = logging.getLogger(__name__)

# The Gram route needs τ² well above float64 rounding of a Cholesky factorisation (~k·eps64).
GRAM_RESOLUTION = 1e3
# A batch of orderings gathers at most this many bytes of prefix rows (the QR route factorises
# a whole batch at once; the Gram route holds one ordering's block at a time).
BATCH_BYTES = 2**28
# Orderings in the first batch, whose outcome guides the search in the others.
FIRST_BATCH = 8
# Row blocks of the all-pairs check.
PAIR_BLOCK = 1024


@dataclass(frozen=True)
class Certificate:
    """An exact upper bound on the Kruskal rank: a set of ``size`` vectors that is dependent.

    Attributes:
        kind: zero_vector, dependent_pair, sampled_subset or spectral.
        size: size of the dependent set; the Kruskal rank is at most size − 1.
        indices: the set's row indices (empty for spectral: every subset of that size).
        verified: re-checked with a direct float64 SVD (spectral: by interlacing).
    """

    kind: str
    size: int
    indices: tuple[int, ...] = ()
    verified: bool = True


@dataclass(frozen=True)
class PairStats:
    """All-pairs checks of the query set."""

    zero_rows: int
    duplicate_pairs: int  # bitwise identical rows
    dependent_pairs: int  # pairs that are numerically dependent (duplicates included)
    near_duplicate_pairs: int  # |cosine| ≥ the configured threshold (a diagnostic)
    example: tuple[int, int] | None  # one dependent pair, if any


@dataclass(frozen=True)
class KruskalProfile:
    """Result of :func:`kruskal_profile`.

    Attributes:
        p: P(k) for k = 0 … min(T, d); p[0] = 1.
        estimate: largest k with P(k) = 1 over the samples, capped by the certified upper bound.
        upper_bound: exact upper bound on the Kruskal rank from the certificates.
        lower_bound: exact lower bound (0, 1 or 2) from the zero-vector and all-pairs checks.
        m: (S,) leading-independent lengths of the sampled orderings.
        rtol: relative tolerance used (σ_min > rtol·σ_max means independent).
        route: gram (shifted Cholesky in float64) or qr (Householder QR + exact SVDs).
        spectral_cap: every k-subset with k > spectral_cap is provably dependent.
    """

    p: np.ndarray
    estimate: int
    upper_bound: int
    lower_bound: int
    m: np.ndarray
    T: int
    d: int
    rtol: float
    route: str
    spectral_cap: int
    pairs: PairStats
    certificates: tuple[Certificate, ...] = field(default_factory=tuple)
    seconds: float = 0.0

    @property
    def samples(self) -> int:
        return int(self.m.size)

    def independent_count(self, k: int) -> int:
        """Number of sampled k-subsets that were independent."""
        return int((self.m >= k).sum())

    def interval(self, k: int, level: float = 0.95) -> tuple[float, float]:
        """Two-sided Clopper–Pearson interval for P(k)."""
        return clopper_pearson(self.independent_count(k), self.samples, level)

    def dependent_fraction_bound(self, k: int, level: float = 0.95) -> float:
        """One-sided upper confidence bound on the fraction of dependent k-subsets."""
        dependent = self.samples - self.independent_count(k)
        if dependent == self.samples:
            return 1.0
        return float(stats.beta.ppf(level, dependent + 1, self.samples - dependent))


def clopper_pearson(successes: int, trials: int, level: float = 0.95) -> tuple[float, float]:
    """Exact binomial confidence interval for a proportion."""
    if trials == 0:
        return 0.0, 1.0
    alpha = 1.0 - level
    lo = 0.0 if successes == 0 else stats.beta.ppf(alpha / 2, successes, trials - successes + 1)
    hi = (
        1.0
        if successes == trials
        else stats.beta.ppf(1 - alpha / 2, successes + 1, trials - successes)
    )
    return float(lo), float(hi)


def matrix_rank_rtol(rows: int, cols: int, dtype: np.dtype | torch.dtype) -> float:
    """The numpy / torch ``matrix_rank`` relative tolerance: max(rows, cols)·eps(dtype)."""
    return max(rows, cols) * dtype_eps(dtype)


def dtype_eps(dtype: np.dtype | torch.dtype) -> float:
    """Machine epsilon of a floating dtype (float64's for integers)."""
    if isinstance(dtype, torch.dtype):
        return (
            torch.finfo(dtype).eps if dtype.is_floating_point else float(np.finfo(np.float64).eps)
        )
    dtype = np.dtype(dtype)
    return (
        float(np.finfo(dtype).eps)
        if np.issubdtype(dtype, np.floating)
        else float(np.finfo(np.float64).eps)
    )


def kruskal_profile(
    x: np.ndarray | torch.Tensor,
    samples: int,
    seed: int = 0,
    *,
    rtol: float | None = None,
    near_duplicate_cosine: float = 0.999,
    device: str | torch.device = "cpu",
    method: str = "auto",
    progress: bool = False,
    workers: int = 1,
) -> KruskalProfile:
    """Estimate P(k) for every k and certify what can be certified.

    Args:
        x: (T, d) queries; the tolerance follows their stored dtype.
        samples: number S of random orderings.
        seed: seed of the orderings.
        rtol: relative tolerance; None = max(k, d)·eps(dtype), the matrix_rank rule.
        near_duplicate_cosine: pairs with |cosine| at least this are counted as near-duplicates
            (a diagnostic; numerically dependent pairs are certificates whatever this is).
        device: torch device for the factorisations.
        method: auto, gram or qr (see :mod:`memcap._prefix_rank`).
        progress: show a progress bar over batches of orderings.
        workers: processes that search batches of orderings in parallel (the Gram route on
            the CPU; elsewhere one). The result does not depend on it.
    """
    start = time.perf_counter()
    data = torch.as_tensor(x)
    if data.ndim != 2 or data.shape[0] == 0 or data.shape[1] == 0:
        raise ValueError(f"expected a non-empty (T, d) array, got shape {tuple(data.shape)}")
    if samples < 1:
        raise ValueError("samples must be at least 1")
    if workers < 1:
        raise ValueError("workers must be at least 1")
    t, d = data.shape
    kmax = min(t, d)
    tau = float(rtol) if rtol is not None else matrix_rank_rtol(kmax, d, data.dtype)
    device = torch.device(device)
    scaled = _scaled_float64(data).to(device)
    singular, vh = _svd(scaled)
    route = _route(method, tau, kmax)
    pairs = pair_statistics(scaled, tau, near_duplicate_cosine)
    cap = spectral_cap(scaled, singular, vh, tau)
    problem = _prefix_rank.prepare(scaled, singular, vh, tau, route)
    m, witness = _sample_prefixes(problem, samples, seed, min(kmax, cap), progress, workers)
    p = np.array([(m >= k).mean() for k in range(kmax + 1)])
    certificates = _certificates(scaled, pairs, cap, kmax, witness, tau)
    upper = min([kmax] + [c.size - 1 for c in certificates if c.verified])
    lower = 0 if pairs.zero_rows else (1 if pairs.dependent_pairs else min(2, kmax))
    sampled = int(np.flatnonzero(p == 1.0).max())
    profile = KruskalProfile(
        p=p,
        estimate=min(sampled, upper),
        upper_bound=upper,
        lower_bound=min(lower, upper),
        m=m,
        T=t,
        d=d,
        rtol=tau,
        route=route,
        spectral_cap=cap,
        pairs=pairs,
        certificates=tuple(certificates),
        seconds=time.perf_counter() - start,
    )
    _logger.info(
        "Kruskal profile T=%d d=%d S=%d route=%s: estimate %d, bounds [%d, %d] in %.1f s",
        t, d, samples, route, profile.estimate, profile.lower_bound, upper, profile.seconds,
    )  # fmt: skip
    return profile


def _scaled_float64(data: torch.Tensor) -> torch.Tensor:
    """float64 copy scaled by a power of two so the largest row norm is in [0.5, 1)."""
    x = data.to(torch.float64)
    top = float(torch.linalg.vector_norm(x, dim=1).max())
    if top == 0 or not math.isfinite(top):
        if not math.isfinite(top):
            raise ValueError("queries contain inf or nan")
        return x
    return x * 2.0 ** -math.frexp(top)[1]


def _svd(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Singular values and right singular vectors of the whole (scaled) set."""
    _, s, vh = torch.linalg.svd(x, full_matrices=False)
    return s, vh


def _route(method: str, tau: float, kmax: int) -> str:
    if method not in ("auto", "gram", "qr"):
        raise ValueError(f"method must be auto, gram or qr, not {method!r}")
    if method != "auto":
        return method
    eps64 = float(np.finfo(np.float64).eps)
    return "gram" if tau * tau >= GRAM_RESOLUTION * kmax * eps64 else "qr"


def pair_statistics(x: torch.Tensor, tau: float, cosine: float) -> PairStats:
    """Zero rows, duplicate, dependent and near-duplicate pairs, over all pairs of rows.

    A pair is dependent when the 2 × d matrix fails σ_min > τ·σ_max. Its 2 × 2 Gram matrix
    decides that to float64 rounding (~eps64 in λ_min/λ_max); when τ² is not far above that,
    candidate pairs are re-checked with a direct SVD.
    """
    t = x.shape[0]
    norms2 = (x * x).sum(dim=1)
    nonzero = norms2 > 0
    eps64 = float(np.finfo(np.float64).eps)
    resolvable = tau * tau >= GRAM_RESOLUTION * eps64
    duplicates = _duplicate_pairs(x[nonzero])
    dependent = near = 0
    example = None
    for start in range(0, t, PAIR_BLOCK):
        block = x[start : start + PAIR_BLOCK] @ x.T  # (b, T) inner products
        rows = torch.arange(start, start + block.shape[0], device=x.device)
        a = norms2[rows][:, None]
        c = norms2[None, :]
        upper = (torch.arange(t, device=x.device)[None, :] > rows[:, None]) & nonzero[rows][:, None]
        upper &= nonzero[None, :]
        lam_max = (a + c) / 2 + torch.sqrt(((a - c) / 2) ** 2 + block**2)
        ratio = (a * c - block**2).clamp(min=0) / lam_max**2  # λ_min / λ_max
        candidate = upper & (ratio <= tau * tau + 100 * eps64)
        if not resolvable:
            candidate = _confirm_pairs(x, rows, candidate, tau)
        else:
            candidate &= ratio <= tau * tau
        dependent += int(candidate.sum())
        near += int((upper & (block.abs() >= cosine * torch.sqrt(a * c))).sum())
        if example is None and bool(candidate.any()):
            i, j = torch.nonzero(candidate)[0].tolist()
            example = (start + i, j)
    return PairStats(
        zero_rows=int((~nonzero).sum()),
        duplicate_pairs=duplicates,
        dependent_pairs=dependent,
        near_duplicate_pairs=near,
        example=example,
    )


def _duplicate_pairs(x: torch.Tensor) -> int:
    """Pairs of bitwise identical rows."""
    if x.shape[0] < 2:
        return 0
    _, counts = torch.unique(x, dim=0, return_counts=True)
    return int((counts * (counts - 1) // 2).sum())


def _confirm_pairs(x: torch.Tensor, rows: torch.Tensor, candidate: torch.Tensor, tau: float):
    """Keep only candidate pairs that a direct SVD of the two rows finds dependent."""
    confirmed = torch.zeros_like(candidate)
    for i, j in torch.nonzero(candidate).tolist():
        pair = torch.stack([x[rows[i]], x[j]])
        confirmed[i, j] = not _prefix_rank.prefix_is_independent(pair, tau)
    return confirmed


def spectral_cap(x: torch.Tensor, singular: torch.Tensor, vh: torch.Tensor, tau: float) -> int:
    """Largest k not excluded by the spectrum: for larger k every k-subset is dependent.

    Any k-subset A has σ_k(A) ≤ σ_k(X) (interlacing) and σ_max(A) ≥ L_k, the larger of its
    k-th smallest row norm and ‖A v₁‖ over the k smallest projections on X's top singular
    vector. So σ_k(X) ≤ τ·L_k proves every k-subset dependent.
    """
    t, d = x.shape
    kmax = min(t, d)
    norms = torch.sort(torch.linalg.vector_norm(x, dim=1)).values
    proj = torch.sort((x @ vh[0]) ** 2).values
    lower = torch.maximum(norms[:kmax], torch.sqrt(torch.cumsum(proj, 0)[:kmax]))
    slack = _prefix_rank.BRACKET_SLACK * float(singular[0]) if singular.numel() else 0.0
    excluded = torch.nonzero(singular[:kmax] + slack <= tau * lower).flatten()
    return int(excluded[0]) if excluded.numel() else kmax


def _sample_prefixes(
    problem: _prefix_rank.PrefixProblem,
    samples: int,
    seed: int,
    kmax: int,
    progress: bool,
    workers: int,
) -> tuple[np.ndarray, list[int]]:
    """m for ``samples`` uniformly random orderings, in batches of bounded memory.

    Also returns the smallest dependent prefix met (its row indices; empty if none).
    """
    t = problem.x.shape[0]
    if kmax == 0:  # every single vector is zero (or the tolerance exceeds 1)
        return np.zeros(samples, dtype=np.int64), []
    per_sample = 8 * kmax * problem.x.shape[1]  # kmax ≤ d: the rows outweigh an R factor
    batch = int(min(samples, max(1, BATCH_BYTES // max(per_sample, 1)), 512))
    if workers > 1:  # enough batches to keep every worker busy
        batch = max(1, min(batch, math.ceil(samples / (4 * workers))))
    generator = torch.Generator().manual_seed(seed)
    # A small first batch teaches the search where prefixes turn dependent.
    starts = [0, *range(min(FIRST_BATCH, batch, samples), samples, batch)]
    sizes = np.diff([*starts, samples])
    batches = (_orderings(generator, int(size), t, kmax) for size in sizes)
    out = np.empty(samples, dtype=np.int64)
    witness: list[int] = []
    searched = tqdm(
        _search_batches(problem, batches, workers),
        total=len(sizes),
        disable=not progress,
        mininterval=5,
        desc="batches",
    )
    for start, (order, m) in zip(starts, searched, strict=True):
        out[start : start + len(m)] = m
        worst = int(np.argmin(m))
        if m[worst] < kmax and (not witness or m[worst] + 1 < len(witness)):
            witness = order[worst, : m[worst] + 1].tolist()
    return out, witness


def _search_batches(
    problem: _prefix_rank.PrefixProblem, batches: Iterator[torch.Tensor], workers: int
) -> Iterator[tuple[torch.Tensor, np.ndarray]]:
    """(orderings, m) for each batch, in order. With several workers and the Gram route on the
    CPU, batches after the first go to forked processes that share the problem (its Gram
    matrix included) copy-on-write; at most two batches per worker are in flight."""
    first = next(batches)
    m, hint = _search(problem, first, None)
    yield first, m
    parallel = workers > 1 and problem.route == "gram" and problem.x.device.type == "cpu"
    if parallel and not _can_fork():
        _logger.warning("workers=%d ignored: no safe fork on %s", workers, sys.platform)
        parallel = False
    if not parallel:
        for order in batches:
            m, hint = _search(problem, order, hint)
            yield order, m
        return
    context = multiprocessing.get_context("fork")
    with context.Pool(workers, initializer=_start_worker, initargs=(problem, hint)) as pool:
        pending: deque = deque()
        for order in batches:
            pending.append((order, pool.apply_async(_search_in_worker, (order.numpy(),))))
            if len(pending) >= 2 * workers:
                order, result = pending.popleft()
                yield order, result.get()
        while pending:
            order, result = pending.popleft()
            yield order, result.get()
        pool.close()
        pool.join()


def _can_fork() -> bool:
    """Whether worker processes can be forked safely (not on macOS, where system frameworks
    do not survive a fork, nor where the platform has no fork)."""
    return sys.platform != "darwin" and "fork" in multiprocessing.get_all_start_methods()


def _search(
    problem: _prefix_rank.PrefixProblem,
    order: torch.Tensor,
    hint: _shifted_search.SearchHint | None,
) -> tuple[np.ndarray, _shifted_search.SearchHint | None]:
    """m for each ordering of a batch, and the Gram route's hint for the next batch."""
    if problem.route != "gram":
        return _prefix_rank.search_qr(problem, order.to(problem.x.device)).cpu().numpy(), hint
    # One BLAS thread: the factorisations are small, and threads only contend for them.
    with threadpool_limits(limits=1, user_api="blas"):
        return _shifted_search.search(problem, order.numpy(), hint)


# What a forked search worker keeps between batches: the problem and its latest hint.
_worker: dict = {}


def _start_worker(problem: _prefix_rank.PrefixProblem, hint: _shifted_search.SearchHint) -> None:
    """Set up a forked worker (the problem is inherited, not pickled)."""
    torch.set_num_threads(1)
    _worker.update(problem=problem, hint=hint)


def _search_in_worker(order: np.ndarray) -> np.ndarray:
    m, _worker["hint"] = _search(_worker["problem"], torch.from_numpy(order), _worker["hint"])
    return m


def orderings(t: int, samples: int, seed: int, size: int) -> torch.Tensor:
    """The first ``size`` entries of the ``samples`` orderings :func:`kruskal_profile` draws."""
    return _orderings(torch.Generator().manual_seed(seed), samples, t, size)


def _orderings(generator: torch.Generator, count: int, t: int, size: int) -> torch.Tensor:
    # float64 keys: ties (which would bias an ordering) have probability ~T²·2⁻⁵³. Keys drawn
    # batch by batch are the keys drawn all at once, so batching never changes the samples.
    keys = torch.rand(count, t, generator=generator, dtype=torch.float64)
    return torch.argsort(keys, dim=1)[:, :size]


def _certificates(
    x: torch.Tensor, pairs: PairStats, cap: int, kmax: int, witness: list[int], tau: float
) -> list[Certificate]:
    """Exact upper bounds on the Kruskal rank found along the way."""
    certs = []
    if pairs.zero_rows:
        zero = int(torch.nonzero(torch.linalg.vector_norm(x, dim=1) == 0)[0])
        certs.append(Certificate("zero_vector", 1, (zero,)))
    if pairs.example is not None:
        certs.append(Certificate("dependent_pair", 2, pairs.example))
    if cap < kmax:
        certs.append(Certificate("spectral", cap + 1))
    if witness:
        rows = x[torch.as_tensor(witness, device=x.device)]
        verified = not _prefix_rank.prefix_is_independent(rows, tau)
        certs.append(Certificate("sampled_subset", len(witness), tuple(witness), verified))
        if not verified:
            _logger.warning("sampled dependent set of size %d failed SVD re-check", len(witness))
    return certs
