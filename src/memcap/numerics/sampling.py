"""Random orderings of the queries and their leading independent lengths m, batch by batch."""

from __future__ import annotations

import math

import numpy as np
import torch
from tqdm import tqdm

from memcap.numerics.pool import search_batches
from memcap.numerics.prefix import PrefixProblem

# A batch of orderings gathers at most this many bytes of prefix rows (the QR route factorises
# a whole batch at once; the Gram route holds one ordering's block at a time).
BATCH_BYTES = 2**28
# The device search's batch holds at most this many bytes of Gram blocks (each ordering's
# block, its shifted copy and factor: three kmax × kmax float64 arrays).
DEVICE_BATCH_BYTES = 2**31
# Orderings in the first batch, whose outcome guides the search in the others.
FIRST_BATCH = 8


def orderings(t: int, samples: int, seed: int, size: int) -> torch.Tensor:
    """The first ``size`` entries of the ``samples`` orderings the Kruskal profile draws."""
    return _orderings(torch.Generator().manual_seed(seed), samples, t, size)


def _orderings(generator: torch.Generator, count: int, t: int, size: int) -> torch.Tensor:
    # float64 keys: ties (which would bias an ordering) have probability ~T²·2⁻⁵³. Keys drawn
    # batch by batch are the keys drawn all at once, so batching never changes the samples.
    keys = torch.rand(count, t, generator=generator, dtype=torch.float64)
    return torch.argsort(keys, dim=1)[:, :size]


def sample_prefixes(
    problem: PrefixProblem,
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
    if problem.route == "gram" and problem.search == "device":
        budget, per_sample = DEVICE_BATCH_BYTES, 3 * 8 * kmax * kmax
    else:  # kmax ≤ d: the rows outweigh an R factor
        budget, per_sample = BATCH_BYTES, 8 * kmax * problem.x.shape[1]
    batch = int(min(samples, max(1, budget // max(per_sample, 1)), 512))
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
        search_batches(problem, batches, workers),
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
