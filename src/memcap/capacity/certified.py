"""Certified memorization capacity of one attention layer, without training.

For T examples (query x_t, context E_t ∈ R^{n×d}) and attention weights a_{t,h} ∈ R^n of
every head h, the matrix

    Z = [a_{t,1}ᵀ E_t, …, a_{t,H}ᵀ E_t]_{t=1..T}   (T rows, H·d columns)

holds every head's attention-weighted context. A linear readout w fits *any* targets y on a
set of examples exactly iff their rows of Z are independent, so rank(Z) examples can be
memorized with those attention weights: the *certified capacity*. Paper A's Theorem 1
builds attention weights with rank(Z) ≥ H(n−1)+1; with a shared context every head's block is a
convex combination of the same n rows, so rank(Z) ≤ H(n−1)+1 for any weights.

Attention weights are either random (:func:`random_attention`: W_Q, W_K with i.i.d.
N(0, 1/d) entries per head, scores (E W_K)(W_Qᵀ x)/√d_h, inputs first divided by one scalar so
context entries have unit RMS, which keeps logits of order one) or given, e.g. a trained
model's (:func:`certified_capacity_from_attention`).

Used by the synthetic stage (random and trained attention) and by the capacity stage (random
attention on real embeddings, each example with its own context and with one context shared by
all, :func:`shared_context_spectra`, read by :mod:`memcap.capacity.spectrum`). Pure
functions, no I/O.

Ranks are numerical: singular values of Z in float64 above ``σ_max · max(T, H·d) · ε`` (ε the
float64 machine epsilon; NumPy's ``matrix_rank`` default) count. Inputs known only to a relative
precision ε_in (embeddings stored in float32: ε_in = 1.19e-7) also drop singular values below
``ε_in · ‖Z‖_F``: rounding the inputs moves Z by about that much in norm, so by Weyl's
inequality such a singular value could be rounding alone (see ``input_eps``). The capacity
stage reads its spectra against the measured forward error instead
(:mod:`memcap.capacity.spectrum`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from memcap.capacity.spectrum import Spectrum

ArrayLike = np.ndarray | Tensor
CHUNK = 256  # examples per block when building Z from (possibly memory-mapped) contexts
EPS64 = float(np.finfo(np.float64).eps)


@dataclass(frozen=True)
class Rank:
    """A numerical rank with the singular values at its edge (relative to σ_max)."""

    rank: int
    last_kept: float  # σ_rank / σ_max (NaN for a zero matrix)
    first_dropped: float  # σ_{rank+1} / σ_max (0 when no singular value was dropped)


def numerical_rank(matrix: Tensor, rtol: float | None = None, input_eps: float = 0.0) -> Rank:
    """Rank of a 2-D matrix from its float64 singular values.

    Args:
        matrix: (rows, cols).
        rtol: relative tolerance; default ``max(rows, cols) · ε_float64``.
        input_eps: relative precision of the data the matrix was computed from; singular
            values below ``input_eps · ‖matrix‖_F`` do not count either.
    """
    singular = torch.linalg.svdvals(matrix.to(torch.float64))
    if singular.numel() == 0 or float(singular[0]) == 0.0:
        return Rank(0, float("nan"), 0.0)
    if rtol is None:
        rtol = max(matrix.shape) * torch.finfo(torch.float64).eps
    relative = singular / singular[0]
    rtol = max(rtol, input_eps * float(relative.norm()))  # ‖M‖_F / σ_max from the same values
    rank = int((relative > rtol).sum())
    dropped = float(relative[rank]) if rank < relative.numel() else 0.0
    return Rank(rank, float(relative[rank - 1]), dropped)


def attention_features(attention: Tensor, contexts: Tensor) -> Tensor:
    """Z: (T, H·d) attention-weighted contexts from weights (T, H, n) and contexts (T, n, d)."""
    mixed = torch.einsum("thn,tnd->thd", attention.to(torch.float64), contexts.to(torch.float64))
    return mixed.reshape(mixed.shape[0], -1)


def random_attention_weights(d: int, H: int, d_h: int, seed: int) -> Tensor:
    """(H, 2, d, d_h) query and key weights, N(0, 1/d); the first H of H' > H heads agree."""
    # NumPy fills in order, so a draw for fewer heads is a prefix of a draw for more.
    draw = np.random.default_rng(int(seed)).standard_normal((H, 2, d, d_h))
    return torch.from_numpy(draw / d**0.5)


def random_attention(queries: Tensor, contexts: Tensor, weights: Tensor) -> Tensor:
    """The query's attention (T, H, n) under given query/key weights.

    Args:
        queries: (T, d), float64.
        contexts: (T, n, d), float64.
        weights: (H, 2, d, d_h) from :func:`random_attention_weights`.
    """
    d_h = weights.shape[-1]
    q = torch.einsum("td,hde->the", queries, weights[:, 0])  # (T, H, d_h)
    qk = torch.einsum("the,hde->thd", q, weights[:, 1])  # (T, H, d): W_K W_Qᵀ x
    scores = torch.einsum("thd,tnd->thn", qk, contexts) / d_h**0.5
    return torch.softmax(scores, dim=-1)


def certified_capacity_curve(
    queries: ArrayLike,
    contexts: ArrayLike,
    H_values: Sequence[int],
    d_h: int,
    seed: int = 0,
    device: torch.device | None = None,
    input_eps: float = 0.0,
) -> list[Rank]:
    """Certified capacity for each head count in ``H_values``, the heads nested (one draw).

    Nested heads make the rank non-decreasing in H and it cannot exceed T: once it reaches T,
    larger H get rank T without another SVD (their ``last_kept`` is NaN). ``input_eps`` is the
    inputs' relative precision (:func:`input_precision`; 0 treats them as exact), see
    :func:`numerical_rank`.
    """
    if not H_values or min(H_values) < 1:
        raise ValueError("need at least one head count, all ≥ 1")
    features = own_context_features(queries, contexts, max(H_values), d_h, seed, device)
    T, _, d = features.shape
    ranks: dict[int, Rank] = {}
    for h in sorted(set(H_values)):
        if ranks and max(r.rank for r in ranks.values()) == T:
            ranks[h] = Rank(T, float("nan"), 0.0)
        else:
            z = features[:, :h].reshape(T, h * d)
            ranks[h] = numerical_rank(z, input_eps=input_eps)
    return [ranks[h] for h in H_values]


def own_context_features(
    queries: ArrayLike,
    contexts: ArrayLike,
    max_H: int,
    d_h: int,
    seed: int = 0,
    device: torch.device | None = None,
) -> Tensor:
    """Every head's block of Z, (T, max_H, d) float64, each example with its own context.

    Z for the first H heads is ``features[:, :H].reshape(T, H·d)``. Built in example chunks,
    so ``contexts`` may be a memory-mapped array too large for memory in float64; ``device``
    (default CPU) computes it there.
    """
    if max_H < 1 or d_h < 1:
        raise ValueError("need max_H ≥ 1 and d_h ≥ 1")
    T, _, d = contexts.shape
    if tuple(queries.shape) != (T, d):
        raise ValueError(f"queries {tuple(queries.shape)} do not match contexts {contexts.shape}")
    weights = random_attention_weights(d, max_H, d_h, seed).to(device)
    scale = _rms(contexts)
    blocks = []
    for start in range(0, T, CHUNK):
        stop = min(T, start + CHUNK)
        x = _float64(queries[start:stop]).to(device) / scale
        e = _float64(contexts[start:stop]).to(device) / scale
        attn = random_attention(x, e, weights)
        blocks.append(attention_features(attn, e).view(stop - start, max_H, d))
    return torch.cat(blocks)  # (T, H_max, d)


def shared_context_spectra(
    queries: ArrayLike, context: ArrayLike, H_values: Sequence[int], weights: Tensor
) -> list[Spectrum]:
    """Singular values of Z with one context E (n × d) shared by every example, for each H.

    Every head's block of Z is A_h·E (A_h: the T × n attention weights, rows summing to one),
    so rank(Z) ≤ H(n−1)+1 whatever the weights (Theorem 1's count caps it here), and the rank
    can fall below the ceiling min(T, H·d) — the configuration in which the capacity depends on
    n. With E = L·Qᵀ (a thin QR of Eᵀ; Qᵀ has orthonormal rows) Z = [A_1 L, …, A_H L]·diag(Qᵀ),
    so Z has the singular values of the T × H·r matrix W = [A_h L] (r = min(n, d)). Examples
    with the same query give the same row: W keeps one row per distinct query, scaled by the
    square root of its count (the same WᵀW, so the same singular values). The heads are nested:
    where H·r is at most W's rows, one QR of W for the largest such H gives every smaller H's
    singular values from the leading block of its R. The attention is that of
    :func:`own_context_features` (same scaling) with every context set to ``context``, under
    ``weights`` from :func:`random_attention_weights` for at least max(H_values) heads.
    """
    if not H_values or min(H_values) < 1 or max(H_values) > len(weights):
        raise ValueError("need at least one head count, all ≥ 1 and at most the weights' heads")
    x, e = _float64(queries), _float64(context)
    T, d = x.shape
    if e.ndim != 2 or e.shape[1] != d:
        raise ValueError(f"context {tuple(e.shape)} does not match queries {tuple(x.shape)}")
    scale = _rms(e[None])
    distinct, counts = torch.unique(x, dim=0, return_counts=True)
    x, e = distinct / scale, e / scale
    d_h = weights.shape[-1]
    left = torch.linalg.qr(e.T, mode="r").R.T  # Eᵀ = Q R: E = Rᵀ Qᵀ, L = Rᵀ (n × r)
    keys = torch.einsum("nd,hde->hne", e, weights[:, 1])  # (H, n, d_h): E W_K, once
    q = torch.einsum("td,hde->the", x, weights[:, 0])  # (U, H, d_h)
    attention = torch.softmax(torch.einsum("the,hne->thn", q, keys) / d_h**0.5, dim=-1)
    reduced = torch.einsum("thn,nr->thr", attention, left)  # (U, H, r)
    reduced *= counts.to(torch.float64).sqrt()[:, None, None]
    singular = _nested_singular_values(reduced, H_values)
    return [Spectrum.of(singular[h].numpy(), (T, h * d)) for h in H_values]


def _nested_singular_values(blocks: Tensor, H_values: Sequence[int]) -> dict[int, Tensor]:
    """Singular values of ``blocks[:, :h].reshape(rows, -1)`` for each h (nested columns)."""
    rows, _, width = blocks.shape
    tall = sorted({h for h in H_values if h * width <= rows})
    singular = {}
    if tall:
        upper = torch.linalg.qr(blocks[:, : tall[-1]].reshape(rows, -1), mode="r").R
        for h in tall:
            singular[h] = torch.linalg.svdvals(upper[: h * width, : h * width])
    for h in set(H_values) - set(tall):  # wide: the R of Wᵀ = Q R is square (rows × rows)
        square = torch.linalg.qr(blocks[:, :h].reshape(rows, -1).T, mode="r").R
        singular[h] = torch.linalg.svdvals(square)
    return singular


def certified_capacity_from_attention(attention: ArrayLike, contexts: ArrayLike) -> int:
    """Certified capacity for given (e.g. trained) attention weights (T, H, n) on (T, n, d)."""
    return numerical_rank(attention_features(_float64(attention), _float64(contexts))).rank


def saturation(attention: Tensor, threshold: float = 0.99) -> Tensor:
    """Per head, the fraction of the query's attention weights above ``threshold``, per example.

    Args:
        attention: (T, H, n) weights of the query over its context.
        threshold: at least 0.5, so at most one weight per example can exceed it and the
            value is the fraction of examples on which the head is saturated (near one-hot).

    Returns:
        (H,) values in [0, 1].
    """
    if threshold < 0.5:
        raise ValueError("threshold must be at least 0.5")
    return (attention > threshold).sum(-1).to(torch.float64).mean(0)


def input_precision(*arrays: ArrayLike) -> float:
    """The largest machine epsilon of the arrays' floating dtypes (float32: 1.19e-7)."""
    return max(
        float(torch.finfo(a.dtype).eps if isinstance(a, Tensor) else np.finfo(a.dtype).eps)
        for a in arrays
    )


def _float64(x: ArrayLike) -> Tensor:
    if isinstance(x, Tensor):
        return x.to(torch.float64)
    return torch.from_numpy(np.array(x, dtype=np.float64))  # a copy: inputs may be read-only


def _rms(contexts: ArrayLike) -> float:
    """Root mean square of the context entries, accumulated in chunks."""
    total, count = 0.0, 0
    for start in range(0, contexts.shape[0], CHUNK):
        block = _float64(contexts[start : start + CHUNK])
        total += float((block**2).sum())
        count += block.numel()
    rms = (total / max(count, 1)) ** 0.5
    return rms if rms > 0 else 1.0
