"""Circuits: the minimal dependent subsets behind the dependent prefixes the search finds.

An ordering whose prefix of m + 1 rows is dependent while its first m are not holds a
dependence that involves its last row p: the null vector v = (−c, 1) with
c = G_m⁻¹·A_m x_p (the least-squares coefficients of x_p on the first m rows; a Cholesky
factor of their Gram matrix) has ‖vᵀP‖ = ‖x_p − A_mᵀc‖. The support of v is a dependent
subset, and it is usually far smaller than the prefix: an exact sum x_c = x_a + x_b leaves
three entries, a duplicate two. Rows whose coefficient contributes less than the zero line
allows (|v_i|·‖x_i‖ summed, a bound on what dropping them adds to the residual) are dropped;
the rest is checked directly:

* **dependent**: a float64 SVD of its c rows puts σ_min at or below the measured error's
  zero line, ERROR_FACTOR·δ times its largest row norm (:mod:`memcap.numerics.error`): Kruskal
  rank ≤ c − 1, whatever the tolerance;
* **minimal** (a circuit): with u the left singular vector of σ_min, deleting row i leaves
  σ_min ≥ |u_i|·σ_{c−1}; when min_i |u_i|·σ_{c−1} clears the zero line, every proper subset is
  independent. Otherwise the support of u is reduced again.

A set of size d is never reported: d random vectors in R^d are singular to within any error
with positive probability (the null's business, :mod:`memcap.numerics.null`), and a set whose
every d-subset is dependent is caught whole by the spectrum (``spectral_cap``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.linalg import lapack
from threadpoolctl import threadpool_limits

# Rounds of "take the support of the null vector, check it" per prefix.
MAX_ROUNDS = 4
# Distinct circuits kept (the smallest first); more add no bound.
MAX_CIRCUITS = 16


@dataclass(frozen=True)
class Circuit:
    """A dependent set of queries, verified by SVD against the zero line.

    Attributes:
        indices: its rows, sorted.
        ratio: σ_min/σ_max of the set.
        zero_line: the zero line of its σ_min/σ_max (the error's, over its concentration).
        minimal: every proper subset is independent (it is a circuit).
        second: σ_{c−1}/σ_max, the smallest singular value a proper subset keeps.
    """

    indices: tuple[int, ...]
    ratio: float
    zero_line: float
    minimal: bool
    second: float

    @property
    def size(self) -> int:
        return len(self.indices)

    @property
    def kind(self) -> str:
        """What a set of this size is, in words."""
        return {1: "zero vector", 2: "dependent pair", 3: "dependent triple"}.get(
            self.size, f"dependent set of {self.size}"
        )


def reduce_prefixes(
    x: torch.Tensor,
    gram: np.ndarray,
    orders: np.ndarray,
    m: np.ndarray,
    searched: int,
    zero_line: float,
    candidates: np.ndarray | None = None,
) -> list[Circuit]:
    """The circuits found in the dependent prefixes order[s, :m[s] + 1], smallest first.

    Args:
        x: (T, d) float64 set, as decided (scaled).
        gram: its Gram matrix x xᵀ.
        orders: (S, ≥ searched) orderings.
        m: (S,) leading independent lengths at the search's tolerance.
        searched: prefixes were searched up to this size (m = searched: none dependent).
        zero_line: ERROR_FACTOR·δ: a set whose σ_min is at most this times its largest row
            norm is dependent within the error.
        candidates: (S,) orderings worth reducing (None: every dependent one).
    """
    d = x.shape[1]
    norms = np.sqrt(np.clip(np.diag(gram), 0, None))
    found: list[Circuit] = []
    keep = m < searched if candidates is None else (m < searched) & candidates
    with threadpool_limits(limits=1, user_api="blas"):
        for s in sorted(np.flatnonzero(keep), key=lambda s: m[s]):
            prefix = orders[s, : m[s] + 1]
            if any(set(c.indices) <= set(prefix.tolist()) for c in found):
                continue  # already explained by a circuit it holds
            support = _null_support(gram, norms, prefix, zero_line)
            circuit = _verify(x, support, zero_line, d) if support is not None else None
            if circuit is not None and circuit.indices not in {c.indices for c in found}:
                found.append(circuit)
                found.sort(key=lambda c: (c.size, c.ratio))
                del found[MAX_CIRCUITS:]
    return found


def _null_support(
    gram: np.ndarray, norms: np.ndarray, prefix: np.ndarray, zero_line: float
) -> np.ndarray | None:
    """The rows of ``prefix`` its last row's dependence needs, or None when the null vector's
    residual does not reach the zero line; the SVD of :func:`_verify` decides."""
    head, last = prefix[:-1], prefix[-1]
    if head.size == 0:
        return prefix if norms[last] == 0 else None
    block = gram[np.ix_(head, head)]
    factor, info = lapack.dpotrf(block, lower=1, clean=1, overwrite_a=0)
    if info != 0:
        return None  # the head itself is dependent at float64 resolution: not this ordering's
    coefficients = lapack.dpotrs(factor, gram[head, last], lower=1)[0]
    vector = np.append(-coefficients, 1.0)
    residual2 = gram[last, last] - gram[last, head] @ coefficients
    residual = float(np.sqrt(max(residual2, 0.0)))
    size = float(np.linalg.norm(vector))
    # σ_min(P) ≤ ‖vᵀP‖/‖v‖: zero when that is under the line times the largest row norm
    if residual > zero_line * float(norms[prefix].max()) * size:
        return None
    weight = np.abs(vector) * norms[prefix]  # what each row adds to ‖vᵀP‖ when kept
    order = np.argsort(weight)
    # dropping rows adds at most their weight; the last row (kept) bounds the kept set's norm
    budget = zero_line * float(norms[last]) * size - residual
    dropped = np.cumsum(weight[order]) <= budget
    return np.sort(prefix[order[~dropped]])


def _verify(x: torch.Tensor, rows: np.ndarray, line: float, d: int) -> Circuit | None:
    """The set ``rows`` checked by SVD; its null vector's support taken again until minimal.
    Returns the smallest set verified dependent, or None."""
    best = None
    for _ in range(MAX_ROUNDS):
        if rows.size == 0 or rows.size >= d:
            return best
        chosen = x[torch.as_tensor(rows, device=x.device)]
        u, s, _ = torch.linalg.svd(chosen, full_matrices=False)
        values = s.cpu().numpy()  # descending, one per row (rows < d)
        top = float(values[0])
        if top == 0:
            return Circuit((int(rows[0]),), 0.0, 0.0, True, 0.0)
        floor = line * float(torch.linalg.vector_norm(chosen, dim=1).max())  # zero: σ_min ≤ it
        if float(values[-1]) > floor:
            return best
        indices = tuple(int(r) for r in rows)
        ratio, ratio_line = float(values[-1] / top), floor / top
        if rows.size == 1:
            return Circuit(indices, ratio, ratio_line, True, 0.0)
        second = float(values[-2])
        null = np.abs(u[:, -1].cpu().numpy())
        if float(null.min()) * second > floor:
            return Circuit(indices, ratio, ratio_line, True, second / top)
        best = Circuit(indices, ratio, ratio_line, False, second / top)
        needed = null * second > floor  # removing one of these leaves an independent set
        if needed.all() or not needed.any():
            return best
        rows = rows[needed]
    return best
