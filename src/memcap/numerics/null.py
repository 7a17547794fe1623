"""The random-matrix null: what the same decision reads on data in general position.

An i.i.d. Gaussian T × d matrix is in general position with probability 1, yet its square
subsets are ill-conditioned by nature: P(σ_min ≤ ε/√d) ≈ ε for a d × d block (Edelman 1988),
so some sampled d-subsets of any generic set fall under any fixed tolerance. A decision is
therefore read against the same search on an i.i.d. Gaussian of the same T and d, rounded to
the same stored dtype, scaled the same way and cut by the same S orderings (the same seed):
the null's σ_min/σ_max at each decided k (:mod:`memcap.numerics.ratios`). The Gaussian is
drawn from NULL_SEED, so the null is a pure function of those keys and can be cached by them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from memcap.numerics.equilibrate import scaled_for_rank
from memcap.numerics.kruskal import scaled_float64
from memcap.numerics.ratios import PrefixRatios, prefix_ratios
from memcap.numerics.sampling import orderings

# Seed of the Gaussian draw (the orderings take the decision's own seed).
NULL_SEED = 20_240_617


@dataclass(frozen=True)
class NullKey:
    """What the null depends on: the set's shape, dtype and scaling, the orderings."""

    T: int
    d: int
    dtype: str
    scaling: str
    samples: int
    seed: int

    @property
    def name(self) -> str:
        """A file-name-safe key."""
        return f"T{self.T}_d{self.d}_{self.dtype}_{self.scaling}_S{self.samples}_seed{self.seed}"


def null_key(x: np.ndarray | torch.Tensor, scaling: str, samples: int, seed: int) -> NullKey:
    """The null's key for the set ``x`` decided with this scaling and these orderings."""
    t, d = x.shape
    dtype = str(x.dtype).removeprefix("torch.")
    return NullKey(int(t), int(d), dtype, scaling, int(samples), int(seed))


def gaussian_set(key: NullKey) -> torch.Tensor:
    """The null's i.i.d. standard Gaussian (T, d), rounded to the key's dtype."""
    draw = np.random.default_rng(NULL_SEED).standard_normal((key.T, key.d))
    return torch.from_numpy(draw).to(getattr(torch, key.dtype))


def null_ratios(key: NullKey, sizes: Sequence[int]) -> dict[int, PrefixRatios]:
    """σ_min/σ_max of the null's k-prefixes for each k in ``sizes`` (k ≤ min(T, d)).

    Every ratio below the Gram resolution is resolved by a direct SVD (rare for a Gaussian:
    about 0.2% of d-subsets at d = 768), so the null holds no censored value.
    """
    kmax = min(key.T, key.d)
    wanted = sorted({int(k) for k in sizes if 1 <= k <= kmax})
    if not wanted:
        return {}
    x = scaled_float64(scaled_for_rank(gaussian_set(key), key.scaling))
    orders = orderings(key.T, key.samples, key.seed, max(wanted)).numpy()
    gram = (x @ x.T).numpy()
    return {k: prefix_ratios(x, orders, k, gram, _everywhere) for k in wanted}


def _everywhere(concentration: np.ndarray) -> np.ndarray:
    return np.full_like(concentration, np.inf)
