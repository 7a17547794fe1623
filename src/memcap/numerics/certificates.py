"""Certificates: exact upper bounds on the Kruskal rank, each a dependent set of vectors."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from memcap.numerics.pairs import PairStats
from memcap.numerics.prefix import prefix_is_independent

_logger = logging.getLogger(__name__)


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


def certificates(
    x: torch.Tensor, pairs: PairStats, cap: int, kmax: int, witness: list[int], tau: float
) -> list[Certificate]:
    """The certificates found along the way, the sampled dependent set re-checked by SVD.

    Args:
        x: (T, d) float64 set.
        pairs: its all-pairs check.
        cap: its spectral cap.
        kmax: min(T, d).
        witness: row indices of the smallest dependent prefix sampled (empty if none).
        tau: relative tolerance.
    """
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
        verified = not prefix_is_independent(rows, tau)
        certs.append(Certificate("sampled_subset", len(witness), tuple(witness), verified))
        if not verified:
            _logger.warning("sampled dependent set of size %d failed SVD re-check", len(witness))
    return certs
