"""Kruskal-rank profile of a set of query vectors: P(k) for every k from one pass.

P(k) is the fraction of uniformly random k-subsets of the T queries that are linearly
independent under the ``matrix_rank`` tolerance (:mod:`memcap.numerics.tolerance`), by
default on the equilibrated set (:mod:`memcap.numerics.equilibrate`: every coordinate and
every query scaled so that the decision does not depend on units). The first
k entries of a uniformly random ordering form a uniformly random k-subset, and σ_min/σ_max of a
prefix can only fall as it grows (Cauchy interlacing), so each of S sampled orderings has one
number m (prefix k is independent exactly when k ≤ m) and P(k) = #{m ≥ k} / S for every k.

The algorithm (derivations and measured figures: docs/kruskal.md):

1. Set-up (torch, on ``device``): equilibrate the set (unless ``scaling="none"``), scale it
   to float64 by a power of two, take its SVD,
   check all pairs (:mod:`~memcap.numerics.pairs`), compute the spectral cap
   (:mod:`~memcap.numerics.spectral`) and the shared prefix problem
   (:mod:`~memcap.numerics.prefix`).
2. Orderings in batches (:mod:`~memcap.numerics.sampling`), searched in order or by forked
   workers (:mod:`~memcap.numerics.pool`); the result does not depend on the batching or the
   number of workers.
3. m of each ordering (:mod:`~memcap.numerics.search`). Gram route (τ² far above float64
   rounding): with G_k the prefix Gram matrix, k ≤ m iff λ_min(G_k) > τ²·σ_max(A_k)². A
   Cholesky factorisation of G_n − cI breaks down at the first J with λ_min(G_J) ≤ c, testing
   every prefix at once; c comes from certified σ_max brackets
   (:mod:`~memcap.numerics.brackets`). After a breakdown the walk
   (:mod:`~memcap.numerics.walk`) decides J, J + 1, … from Rayleigh and Kato–Temple bounds
   without another factorisation. Windows left open are closed by direct decisions (the
   spectrum of G_k, or an SVD). QR route (float64 data, tiny τ; :mod:`~memcap.numerics.qr`):
   the diagonal of a Householder R bounds m, exact SVDs of R_k bisect.
4. Certificates (:mod:`~memcap.numerics.certificates`): a zero vector, a dependent pair, the
   smallest dependent prefix met, the spectral cap — exact upper bounds on the Kruskal rank.

S samples bound the fraction of dependent k-subsets (Clopper–Pearson) but never prove Kruskal
rank ≥ k; only the certificates and the all-pairs check give exact bounds.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from memcap.numerics.certificates import Certificate, certificates
from memcap.numerics.equilibrate import scaled_for_rank
from memcap.numerics.pairs import PairStats, pair_statistics
from memcap.numerics.prefix import prepare
from memcap.numerics.sampling import sample_prefixes
from memcap.numerics.spectral import spectral_cap
from memcap.numerics.statistics import clopper_pearson, upper_confidence_bound
from memcap.numerics.tolerance import EPS64, gram_resolves, matrix_rank_rtol

_logger = logging.getLogger(__name__)

ROUTES = ("auto", "gram", "qr")
SEARCHES = ("auto", "host", "device")


@dataclass(frozen=True)
class KruskalProfile:
    """Result of :func:`kruskal_profile`.

    Attributes:
        p: P(k) for k = 0 … min(T, d); p[0] = 1.
        estimate: largest k with P(k) = 1 over the samples, capped by the certified upper bound.
        upper_bound: exact upper bound on the Kruskal rank from the certificates.
        lower_bound: exact lower bound (0, 1 or 2) from the zero-vector and all-pairs checks.
        m: (S,) leading-independent lengths of the sampled orderings.
        T, d: number and dimension of the queries.
        rtol: relative tolerance used (σ_min > rtol·σ_max means independent).
        scaling: equilibrate (decided on the balanced set) or none (on the stored values).
        route: gram (shifted Cholesky in float64) or qr (Householder QR + exact SVDs).
        search: where the Gram route searched: host (one ordering at a time) or device
            (batched over orderings in torch); the m are the same.
        spectral_cap: every k-subset with k > spectral_cap is provably dependent.
        pairs: the all-pairs check.
        certificates: the exact upper bounds found.
        seconds: wall time of the computation.
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
    search: str
    spectral_cap: int
    pairs: PairStats
    certificates: tuple[Certificate, ...] = field(default_factory=tuple)
    seconds: float = 0.0
    scaling: str = "none"

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
        return upper_confidence_bound(dependent, self.samples, level)


def kruskal_profile(
    x: np.ndarray | torch.Tensor,
    samples: int,
    seed: int = 0,
    *,
    rtol: float | None = None,
    scaling: str = "equilibrate",
    near_duplicate_cosine: float = 0.999,
    device: str | torch.device = "cpu",
    method: str = "auto",
    search: str = "auto",
    progress: bool = False,
    workers: int = 1,
    max_k: int | None = None,
) -> KruskalProfile:
    """Estimate P(k) for every k and certify what can be certified.

    Args:
        x: (T, d) queries; the tolerance follows their stored dtype.
        samples: number S of random orderings.
        seed: seed of the orderings.
        rtol: relative tolerance; None = max(k, d)·eps(dtype), the matrix_rank rule.
        scaling: equilibrate (default: every coordinate and every query scaled first, so the
            result does not change with the units of either) or none (paper A's rule on the
            stored values).
        near_duplicate_cosine: pairs with |cosine| at least this are counted as near-duplicates
            (a diagnostic; numerically dependent pairs are certificates whatever this is).
        device: torch device for the set-up and the QR route.
        method: auto, gram or qr (auto: gram when τ² resolves through float64 Gram matrices).
        search: where the Gram route searches the orderings: host (SciPy, one at a time),
            device (torch on ``device``, batched over orderings) or auto (device on a GPU).
            The m, the profile and the certificates do not depend on it.
        progress: show a progress bar over batches of orderings.
        workers: processes that search batches of orderings in parallel (the Gram route on
            the CPU; elsewhere one). The result does not depend on it.
        max_k: search prefixes up to this size only (P(k) is NaN beyond it; the orderings are
            the same); None searches every k.
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
    scaled = scaled_float64(scaled_for_rank(data, scaling)).to(device)
    _, singular, vh = torch.linalg.svd(scaled, full_matrices=False)
    route = choose_route(method, tau, kmax)
    where = choose_search(search, device)
    pairs = pair_statistics(scaled, tau, near_duplicate_cosine)
    cap = spectral_cap(scaled, singular, vh, tau)
    problem = prepare(scaled, singular, vh, tau, route, where)
    searched = min(kmax, cap) if max_k is None else min(kmax, cap, max(max_k, 1))
    m, witness = sample_prefixes(problem, samples, seed, searched, progress, workers)
    p = np.array([(m >= k).mean() for k in range(kmax + 1)])
    if searched < min(kmax, cap):  # prefixes past max_k were not searched: P unknown there
        p[searched + 1 :] = np.nan
    certs = certificates(scaled, pairs, cap, kmax, witness, tau)
    upper = min([kmax] + [c.size - 1 for c in certs if c.verified])
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
        search=where if route == "gram" else "device",
        spectral_cap=cap,
        pairs=pairs,
        certificates=tuple(certs),
        seconds=time.perf_counter() - start,
        scaling=scaling,
    )
    _logger.info(
        "Kruskal profile T=%d d=%d S=%d rtol=%.2e (%s) route=%s (%s search): estimate %d, "
        "bounds [%d, %d] in %.1f s", t, d, samples, tau, scaling, route, profile.search,
        profile.estimate, profile.lower_bound, upper, profile.seconds,
    )  # fmt: skip
    return profile


def scaled_float64(data: torch.Tensor) -> torch.Tensor:
    """float64 copy scaled by a power of two so the largest row norm is in [0.5, 1)."""
    x = data.to(torch.float64)
    top = float(torch.linalg.vector_norm(x, dim=1).max())
    if not math.isfinite(top):
        raise ValueError("queries contain inf or nan")
    if top == 0:
        return x
    return x * 2.0 ** -math.frexp(top)[1]


def choose_route(method: str, tau: float, kmax: int) -> str:
    """The route of the prefix search: ``method`` itself, or for auto gram when τ² resolves
    through float64 Gram matrices of up to ``kmax`` rows, else qr."""
    if method not in ROUTES:
        raise ValueError(f"method must be auto, gram or qr, not {method!r}")
    if method != "auto":
        return method
    return "gram" if gram_resolves(tau, kmax * EPS64) else "qr"


def choose_search(search: str, device: torch.device) -> str:
    """Where the Gram route searches: ``search`` itself, or for auto the device when it is
    not the CPU (there the host search, with its worker processes, is the faster)."""
    if search not in SEARCHES:
        raise ValueError(f"search must be auto, host or device, not {search!r}")
    if search != "auto":
        return search
    return "host" if device.type == "cpu" else "device"
