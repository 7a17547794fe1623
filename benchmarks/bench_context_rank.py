"""Context ranks through float64 Gram matrices (ours) vs a direct SVD of every context (naive).

Ours is :func:`memcap.numerics.context_ranks`: eigenvalues of each context's float64 Gram
matrix, an SVD only for contexts with an eigenvalue inside the proven error band around the
tolerance. The naive way takes the float64 singular values of every context, which is what the
rule did for DINOv2-S/14's 257 × 384 float32 contexts before the band was proven (its
tolerance was then deemed too close to the Gram matrix's rounding). Both run on the same
contexts in one process, one thread; ranks must agree exactly. Both decide on the stored values
by default (``--scaling none``, paper A's rule); with ``--scaling equilibrate`` (the stage's
rule) both balance each context first, and ours also ranks the stored values beside (``raw``)
and takes an SVD of every context within a decade of the tolerance. The last line is
``RATIO <naive seconds / ours seconds>``.

    .venv/bin/python benchmarks/bench_context_rank.py  # DINOv2-sized, random
    .venv/bin/python benchmarks/bench_context_rank.py \
        --contexts results/extract/dinov2-s14-pretrained/1/contexts.npy
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from _results import record

from memcap.numerics import SCALINGS, context_ranks, scaled_for_rank
from memcap.numerics.tolerance import matrix_rank_rtol


def naive_ranks(contexts: np.ndarray, chunk: int, scaling: str = "none") -> np.ndarray:
    """Ranks from the float64 singular values of every context (balanced first, or as stored)."""
    tau = matrix_rank_rtol(contexts.shape[1], contexts.shape[2], contexts.dtype)
    ranks = []
    for start in range(0, len(contexts), chunk):
        block = scaled_for_rank(torch.from_numpy(contexts[start : start + chunk]), scaling)
        s = torch.linalg.svdvals(block)
        ranks.append((s > tau * s[:, :1]).sum(1).numpy())
    return np.concatenate(ranks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contexts", help="a stored (T, n, d) contexts.npy; default: random")
    parser.add_argument("--examples", dest="T", type=int, default=256, help="contexts used")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scaling", choices=SCALINGS, default="none", help="both rules' values")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.contexts:
        contexts = np.load(args.contexts, mmap_mode="r")[: args.T]
    else:  # DINOv2-S/14's shape; two tokens repeated (rank 256) in every fourth context
        rng = np.random.default_rng(0)
        contexts = rng.standard_normal((args.T, 257, 384)).astype(np.float32)
        contexts[::4, -1] = contexts[::4, 0]
    contexts = np.ascontiguousarray(contexts)
    timings = {"ours": [], "naive": []}
    for _ in range(args.repeats):
        start = time.perf_counter()
        ours = context_ranks(contexts, scaling=args.scaling)
        timings["ours"].append(time.perf_counter() - start)
        start = time.perf_counter()
        naive = naive_ranks(contexts, 64, args.scaling)
        timings["naive"].append(time.perf_counter() - start)
    if not np.array_equal(ours.rank, naive):
        raise SystemExit(f"ranks differ on {int((ours.rank != naive).sum())} contexts")
    t, n, d = contexts.shape
    ours_s, naive_s = (float(np.median(timings[k])) for k in ("ours", "naive"))
    print(f"{t} contexts {n} x {d} {contexts.dtype}, scaling {args.scaling}:", end=" ")
    print("ranks identical,", end=" ")
    print(f"{ours.svd_checked} SVD-checked")
    print(f"ours (Gram + band) {ours_s:.2f} s,", end=" ")
    print(f"naive (SVD of every context) {naive_s:.2f} s (medians)")
    source = args.contexts or "random, DINOv2-S/14's shape"
    record(
        __file__,
        f"context ranks through float64 Gram matrices with a proven error band vs a direct SVD "
        f"of every context ({t} contexts {n} x {d}, {source}, scaling {args.scaling})",
        naive_s / ours_s,
        ("Gram + band", ours_s, "s"),
        ("SVD of every context", naive_s, "s"),
        ratio_is="SVD seconds / Gram seconds (medians)",
        repeats=args.repeats,
        settings=args,
        extra={"ranks_identical": True, "svd_checked": int(ours.svd_checked)},
    )
    print(f"RATIO {naive_s / ours_s:.2f}")


if __name__ == "__main__":
    main()
