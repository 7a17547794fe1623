"""The whole Kruskal profile P(k), all k, against paper A's method at the single k = n.

Paper A's notebooks draw S random n-subsets of the queries and call ``torch.linalg.matrix_rank``
on each (float32, one call per subset, one after the other). ``memcap.numerics.kruskal_profile``
answers every k from 1 to min(T, d) from S random orderings. Both run on the same data in the
same run, interleaved ``--repeats`` times; medians are compared.

Paper A's loop runs with ``--threads`` torch threads (default 1: its fastest setting on a
2-core CPU, where a second thread makes each small SVD slower); the profile searches its
orderings in ``--workers`` processes (default: every core this process may use). The last line
printed is ``RATIO <profile / single-k>`` on idle cores: the profile's CPU time in this process
(set-up, the first batch) plus its workers' CPU time divided by the number of workers, over
paper A's CPU time (one thread). CPU time is what other jobs on a shared machine do not move,
where wall time swings with them (the same tree read 0.34 and 0.64 by wall time); the measured
wall-time ratio and the plain CPU-time ratio (the work done, whatever the parallelism) are
printed and recorded beside it. With ``--workers 1 --threads 1`` all three agree up to noise.

The profile decides like paper A by default (``--scaling none``: the stored values), so the two
P(n) printed are comparable; ``--scaling equilibrate`` times the rule the assumptions stage
decides with (every coordinate and every query balanced first).

Data (``--data``): ``embedding`` (default) is Gaussian with a mean offset and the covariance
spectrum of random-init ViT-B/16 layer-1 [CLS] tokens (fitted on 800 crops of the
scikit-image photographs: σ_j ≈ 1.27·j^-0.49·exp(−j/162), ‖mean‖ ≈ 6.8); ``gaussian`` is
isotropic N(0, I), the worst case for the profile (almost every d-subset is independent, so
every ordering needs a full d × d factorisation); ``--queries file.npy`` reads real (T, d)
queries, e.g. results/extract/<model>/<layer>/queries.npy.

    .venv/bin/python benchmarks/bench_kruskal.py                 # T=2000 d=768 n=197 S=5000
    .venv/bin/python benchmarks/bench_kruskal.py --samples 500   # quick run
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from memcap.devices import resolve_device  # noqa: E402
from memcap.numerics import SCALINGS, kruskal_profile  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import record  # noqa: E402


def embedding_like(t: int, d: int, seed: int) -> np.ndarray:
    """Gaussian queries with a ViT-like mean and covariance spectrum (see module docstring)."""
    rng = np.random.default_rng(seed)
    j = np.arange(1, d + 1)
    spectrum = 1.27 * j**-0.49 * np.exp(-j / 162)
    basis, _ = np.linalg.qr(rng.standard_normal((d, d)))
    mean = rng.standard_normal(d)
    mean *= 6.8 / np.linalg.norm(mean)
    z = rng.standard_normal((t, d)) * spectrum
    return (mean + z @ basis.T).astype(np.float32)


def paper_a(x: torch.Tensor, n: int, samples: int, seed: int) -> float:
    """Fraction of S random n-subsets with full matrix_rank, one call per subset."""
    torch.manual_seed(seed)
    full = 0
    for _ in range(samples):
        subset = x[torch.randperm(x.shape[0], device=x.device)[:n]]
        full += int(torch.linalg.matrix_rank(subset).item() == n)
    return full / samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--T", type=int, default=2000)
    parser.add_argument("--d", type=int, default=768)
    parser.add_argument("--n", type=int, default=197)
    parser.add_argument("--samples", type=int, default=5000)
    parser.add_argument("--data", choices=["embedding", "gaussian"], default="embedding")
    parser.add_argument("--queries", type=Path, help="a (T, d) .npy file instead of --data")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--scaling", choices=SCALINGS, default="none", help="the profile's (paper A: none)"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)

    if args.queries:
        queries = np.load(args.queries).astype(np.float32)
        source = str(args.queries)
    elif args.data == "gaussian":
        queries = np.random.default_rng(args.seed).standard_normal((args.T, args.d))
        queries = queries.astype(np.float32)
        source = "isotropic Gaussian"
    else:
        queries = embedding_like(args.T, args.d, args.seed)
        source = "embedding-like Gaussian"
    t, d = queries.shape
    x = torch.from_numpy(queries).to(device)
    print(f"data: {source}, T={t} d={d} n={args.n} S={args.samples} device={device}")
    print(
        f"paper A: {args.threads} torch thread(s); profile: {args.workers} worker(s), "
        f"scaling {args.scaling}; repeats: {args.repeats} (interleaved, medians compared)"
    )

    ours, theirs = [], []
    for repeat in range(args.repeats):
        with Timer() as timer:
            p_n = paper_a(x, args.n, args.samples, args.seed + repeat)
        theirs.append(timer)
        with Timer() as timer:
            profile = kruskal_profile(
                x,
                args.samples,
                seed=args.seed + repeat,
                scaling=args.scaling,
                device=device,
                workers=args.workers,
            )
        ours.append(timer)
        print(
            f"repeat {repeat}: paper A (k = n only) {theirs[-1]}, P(n) = {p_n:.4f}; "
            f"profile (k = 1..{min(t, d)}) {ours[-1]}, P(n) = {profile.p[args.n]:.4f}, "
            f"P(d) = {profile.p[min(t, d)]:.4f}, estimate {profile.estimate}, "
            f"route {profile.route}"
        )
    medians = {}
    for name, runs in (("paper A", theirs), ("profile", ours)):
        wall, cpu, idle = (
            statistics.median(
                r.idle(args.workers) if key == "idle" else getattr(r, key) for r in runs
            )
            for key in ("wall", "cpu", "idle")
        )
        medians[name] = wall, cpu, idle
        per = 1e3 / args.samples
        print(
            f"median {name}: {wall:.2f} s wall ({per * wall:.2f} ms per sample), {cpu:.2f} s CPU, "
            f"{idle:.2f} s on idle cores"
        )
    (wall_ours, cpu_ours, idle_ours) = medians["profile"]
    (wall_theirs, cpu_theirs, _) = medians["paper A"]
    print(
        f"wall-time ratio {wall_ours / wall_theirs:.3f}; CPU-time ratio {cpu_ours / cpu_theirs:.3f}"
    )
    ratio = idle_ours / cpu_theirs
    record(
        __file__,
        f"the whole Kruskal profile (every k) vs paper A's {args.samples} matrix_rank calls at "
        f"k = n only ({source}, T={t} d={d} n={args.n}, {args.workers} worker(s))",
        ratio,
        ("profile, on idle cores", idle_ours, "s"),
        ("paper A, k = n only", cpu_theirs, "s CPU"),
        ratio_is="profile on idle cores (own CPU + workers' CPU / workers) / paper A CPU (medians)",
        repeats=args.repeats,
        settings=args,
        other_ratios={
            "wall profile/paper A": wall_ours / wall_theirs,
            "cpu profile/paper A": cpu_ours / cpu_theirs,
        },
    )
    print(f"RATIO {ratio:.3f}")


class Timer:
    """Wall time of a block, and the CPU time of this process and of its finished workers."""

    def __enter__(self) -> Timer:
        self.own, self.workers = time.process_time(), _children_seconds()
        self.wall = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.own = time.process_time() - self.own
        self.workers = _children_seconds() - self.workers
        self.wall = time.perf_counter() - self.wall

    @property
    def cpu(self) -> float:
        return self.own + self.workers

    def idle(self, workers: int) -> float:
        """The wall time on idle cores: this process's CPU time, then the workers' shared out."""
        return self.own + self.workers / max(workers, 1)

    def __str__(self) -> str:
        return f"{self.cpu:.2f} s CPU ({self.wall:.2f} s wall)"


def _children_seconds() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return children.ru_utime + children.ru_stime


if __name__ == "__main__":
    main()
