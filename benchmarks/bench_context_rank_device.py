"""Context ranks of an extraction's stream on a device: solves on the host (ours) vs on the
device (naive), the same contexts, one run.

An extraction on a GPU ranks every layer's contexts while they pass (Assumption 2, raw and
equilibrated). The naive way is what the stream did before: the Gram matrices' eigenvalues
(``torch.linalg.eigvalsh``) and the band's SVDs on the contexts' device, and one
``torch.unique`` per context for the repeated rows. Ours (:class:`ContextRankStream` with
``memcap.devices.host_pool``): the balance, the Gram matrices and one ``torch.unique`` per chunk
on the device, the eigenvalues and SVDs on a pool of host threads. Ranks and SVD flags must
agree exactly (σ within the proven band). Contexts: random, embedding-like (a shared offset and
position pattern), chunks of 32 as an extraction streams them. On a CPU the two differ only in
the row check; on a GPU torch's batched ``eigvalsh`` of matrices over 32 × 32 loops one
cuSOLVER call per matrix. The last line is ``RATIO <naive seconds / ours seconds>``.

    .venv/bin/python benchmarks/bench_context_rank_device.py --d 256 --n 64 --T 256
    python benchmarks/bench_context_rank_device.py --device cuda --d 1280 --T 512  # a GPU
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from _results import record

from memcap.devices import host_pool, resolve_device, synchronize
from memcap.numerics import ContextRankStream
from memcap.numerics.context_rank import gram_matrices, host_ranks
from memcap.numerics.equilibrate import scaled_for_rank
from memcap.numerics.tolerance import matrix_rank_rtol

CHUNK = 32  # an extraction's batch


def contexts_on(device: torch.device, t: int, n: int, d: int, seed: int) -> list[torch.Tensor]:
    """(CHUNK, n, d) float32 chunks on ``device``: Gaussian rows plus a shared offset and a
    position pattern (as hidden states have), a repeated row in every eighth context."""
    generator = torch.Generator().manual_seed(seed)
    offset = torch.randn(d, generator=generator) * 3
    positions = torch.randn(n, d, generator=generator)
    chunks = []
    for start in range(0, t, CHUNK):
        rows = torch.randn(min(CHUNK, t - start), n, d, generator=generator)
        rows = rows + offset + positions
        rows[::8, -1] = rows[::8, 0]
        chunks.append(rows.to(device))
    return chunks


def naive(chunks: list[torch.Tensor], tau: float) -> tuple[np.ndarray, np.ndarray]:
    """Every step on the contexts' device, one ``torch.unique`` per context."""
    ranks, checked = [], np.zeros(2, dtype=np.int64)
    for chunk in chunks:
        for i, scaling in enumerate(("none", "equilibrate")):
            block = scaled_for_rank(chunk, scaling)
            rank, _, _, flags = host_ranks(gram_matrices(block), block, tau, scaling != "none")
            ranks.append(rank)
            checked[i] += flags.sum()
        repeated = [chunk.shape[1] - torch.unique(rows, dim=0).shape[0] for rows in chunk]
        ranks.append(np.array(repeated))
    return np.concatenate(ranks), checked


def ours(chunks: list[torch.Tensor], device: torch.device) -> tuple[np.ndarray, np.ndarray]:
    """The extraction's stream, with the pool a job on ``device`` gets."""
    _, n, d = chunks[0].shape
    pool = host_pool(device)
    stream = ContextRankStream(n, d, device=device, pool=pool)
    for chunk in chunks:
        stream.add(chunk)
    result = stream.result()
    if pool is not None:
        pool.shutdown()
    ranks = []
    for start in range(0, len(result.rank), CHUNK):
        part = slice(start, start + CHUNK)
        ranks += [result.raw.rank[part], result.rank[part], result.repeated_rows[part]]
    flags = [result.raw.svd_checked, result.svd_checked]
    return np.concatenate(ranks), np.array(flags)


def timed(device: torch.device, fn, *args) -> tuple[object, float]:
    """``fn(*args)`` and its wall seconds, the device's queued work included."""
    start = time.perf_counter()
    out = fn(*args)
    synchronize(device)
    return out, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--T", type=int, default=256, help="contexts")
    parser.add_argument("--n", type=int, default=120, help="tokens per context")
    parser.add_argument("--d", type=int, default=1280)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the CPU's)")
    parser.add_argument("--out", type=Path, help="also write the result file here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)  # a GPU job's host threads are the pool's
    device = resolve_device(args.device)
    chunks = contexts_on(device, args.T, args.n, args.d, args.seed)
    tau = matrix_rank_rtol(args.n, args.d, np.float32)
    ours(chunks[:1], device)  # warm-up: kernels, the solver libraries
    naive(chunks[:1], tau)
    times = {"ours": [], "naive": []}
    for _ in range(args.repeats):
        (our_ranks, our_flags), seconds = timed(device, ours, chunks, device)
        times["ours"].append(seconds)
        (their_ranks, their_flags), seconds = timed(device, naive, chunks, tau)
        times["naive"].append(seconds)
    same = np.array_equal(our_ranks, their_ranks)
    their_checked = their_flags.tolist()
    same_svds = our_flags.tolist() == their_checked
    if not (same and same_svds):
        raise SystemExit(f"ranks or SVD checks differ: {our_flags} vs {their_checked}")
    ours_s, naive_s = (float(np.median(times[k])) for k in ("ours", "naive"))
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"{args.T} contexts {args.n} x {args.d} on {where}: ranks and SVD checks identical")
    print(f"ours (host solves) {ours_s:.2f} s, naive (device solves) {naive_s:.2f} s")
    path = record(
        __file__,
        f"the extraction's context-rank stream with eigenvalues and SVDs on host threads vs on "
        f"the contexts' device, one unique per chunk vs per context ({args.T} contexts "
        f"{args.n} x {args.d}, {where})",
        naive_s / ours_s,
        ("host solves", ours_s, "s"),
        ("device solves", naive_s, "s"),
        ratio_is="device-solve seconds / host-solve seconds (medians)",
        repeats=args.repeats,
        settings=args,
        summary="ranks and SVD checks identical"
        + (
            "; on a CPU both solve on the host: equal work, the GPU's run is the one"
            if device.type == "cpu"
            else ""
        ),
        extra={"svd_checked": our_flags.tolist(), "contexts_per_second": args.T / ours_s},
    )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(json.loads(path.read_text()), indent=2) + "\n")
    print(f"RATIO {naive_s / ours_s:.2f}")


if __name__ == "__main__":
    main()
