"""The CPU's context-rank work, each context on its own through NumPy (ours) vs the batch at
once through torch (naive: the path other devices take).

Ours is what :func:`memcap.numerics.context_ranks` does on the CPU: every context balanced on
its own (:func:`memcap.numerics.equilibrate.balance`, NumPy, the matrix in cache through its
Sinkhorn–Knopp sweeps and stopping at its own convergence), then its float64 Gram matrix and
eigenvalues through NumPy's BLAS and LAPACK. The naive way balances the whole chunk at once in
torch (its sweeps until the slowest context converges) and forms the Gram matrices and
eigenvalues with torch's batched products and ``eigvalsh``. Same contexts, one process, one
thread; the balanced matrices must agree to 1e-10 and the eigenvalues to the Gram matrix's
own error band. The last line is ``RATIO <naive seconds / ours seconds>`` (medians, all three
steps); the balance alone is beside it.

    .venv/bin/python benchmarks/bench_equilibrate.py  # DINOv2-sized, random with outliers
    .venv/bin/python benchmarks/bench_equilibrate.py \\
        --contexts results/extract/dinov2-s14-pretrained/1/contexts.npy
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch
from _results import record
from threadpoolctl import threadpool_limits

from memcap.numerics.context_rank import gram_matrices
from memcap.numerics.equilibrate import BALANCE_TOL, MAX_ITERATIONS, _balance_batch, balance
from memcap.numerics.tolerance import gram_eigenvalue_error


def ours(block: torch.Tensor) -> tuple[torch.Tensor, np.ndarray, float]:
    """Balanced values, eigenvalues and the balance's seconds, as the CPU computes them."""
    start = time.perf_counter()
    values = balance(block).values
    balanced = time.perf_counter() - start
    lam = np.linalg.eigvalsh(gram_matrices(values).numpy())
    return values, lam, balanced


def naive(block: torch.Tensor) -> tuple[torch.Tensor, np.ndarray, float]:
    """The same through torch, the chunk at once."""
    start = time.perf_counter()
    values = block.to(torch.float64)
    rows, cols, _, _ = _balance_batch(values, BALANCE_TOL, MAX_ITERATIONS)
    values = values * rows.unsqueeze(-1) * cols.unsqueeze(-2)
    balanced = time.perf_counter() - start
    _, n, d = values.shape
    t = values.transpose(1, 2)
    lam = torch.linalg.eigvalsh(values @ t if n <= d else t @ values).numpy()
    return values, lam, balanced


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contexts", help="a stored (T, n, d) contexts.npy; default: random")
    parser.add_argument("--examples", dest="T", type=int, default=128, help="contexts used")
    parser.add_argument("--chunk", type=int, default=32, help="contexts per chunk (extraction's)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    threadpool_limits(1, user_api="blas")
    if args.contexts:
        contexts = np.load(args.contexts, mmap_mode="r")[: args.T]
    else:  # DINOv2-S/14's shape, a few massive coordinates and high-norm tokens
        rng = np.random.default_rng(0)
        contexts = rng.standard_normal((args.T, 257, 384))
        contexts[:, :, :4] *= 300.0
        contexts[:, :3] *= 30.0
    contexts = np.array(contexts, dtype=np.float32)  # a writable copy
    chunks = [
        torch.from_numpy(contexts[s : s + args.chunk]) for s in range(0, len(contexts), args.chunk)
    ]
    times: dict[str, list[float]] = {
        "ours": [],
        "naive": [],
        "ours balance": [],
        "naive balance": [],
    }
    results: dict[str, list[tuple[torch.Tensor, np.ndarray]]] = {}
    for _ in range(args.repeats):
        for name, way in (("ours", ours), ("naive", naive)):
            start, balancing, results[name] = time.perf_counter(), 0.0, []
            for chunk in chunks:
                values, lam, seconds = way(chunk)
                balancing += seconds
                results[name].append((values, lam))
            times[name].append(time.perf_counter() - start)
            times[f"{name} balance"].append(balancing)
    _, n, d = contexts.shape
    band = gram_eigenvalue_error(n, d)
    for (v1, l1), (v2, l2) in zip(results["ours"], results["naive"], strict=True):
        torch.testing.assert_close(v1, v2, rtol=1e-10, atol=0)
        assert np.all(np.abs(l1 - l2) <= band * l2[:, -1:]), "eigenvalues outside the band"
    ours_s, naive_s, ours_b, naive_b = (
        float(np.median(times[k])) for k in ("ours", "naive", "ours balance", "naive balance")
    )
    print(f"{len(contexts)} contexts {n} x {d}: balanced values within 1e-10, eigenvalues in band")
    print(f"ours (each context, NumPy) {ours_s:.2f} s (balance {ours_b:.2f} s),", end=" ")
    print(f"naive (the chunk at once, torch) {naive_s:.2f} s (balance {naive_b:.2f} s) (medians)")
    source = (
        "stored " + "/".join(Path(args.contexts).parts[-3:])
        if args.contexts
        else "random with outliers, DINOv2-S/14's shape"
    )
    record(
        __file__,
        f"CPU context-rank work (balance, Gram, eigenvalues): each context through NumPy vs "
        f"the chunk at once through torch ({len(contexts)} contexts {n} x {d}, {source})",
        naive_s / ours_s,
        ("each context, NumPy", ours_s, "s"),
        ("the chunk at once, torch", naive_s, "s"),
        ratio_is="torch seconds / NumPy seconds (medians)",
        repeats=args.repeats,
        settings=args,
        other_ratios={"balance": naive_b / ours_b},
        summary="balanced values within 1e-10, eigenvalues within the Gram band",
    )
    print(f"RATIO {naive_s / ours_s:.2f}")


if __name__ == "__main__":
    main()
