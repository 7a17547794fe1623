"""The Kruskal profile's ordering search on a torch device against the host search, one layer.

Both searches answer the same S orderings (same seed) of the same queries in the same run:
``host`` walks one ordering at a time with SciPy on one BLAS thread (the default route on a
CPU), ``device`` factorises the orderings' shifted Gram blocks batched in float64 torch on
``--device`` (:mod:`memcap.numerics.batched_search`). The run checks that the m, the profile,
the estimate and the certificates are identical, then prints the median seconds of each and
``RATIO <device wall / host wall>``. Set-up (equilibration unless ``--scaling none``, SVD, all
pairs, spectral cap) is included in both.

Data: embedding-like random float32 queries (a mean offset and a falling spectrum, as in
bench_kruskal.py), or ``--queries file.npy`` (a saved layer, e.g.
results/extract/<model>/<layer>/queries.npy).

    .venv/bin/python benchmarks/bench_kruskal_device.py --d 256 --T 512 --samples 200
    .venv/bin/python benchmarks/bench_kruskal_device.py --d 4096 --T 4096 --samples 100 \\
        --device cuda                                    # on a GPU (docs/kruskal.md)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from memcap.devices import resolve_device  # noqa: E402
from memcap.numerics import SCALINGS, KruskalProfile, kruskal_profile  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import record  # noqa: E402
from bench_kruskal import embedding_like  # noqa: E402


def timed(
    x: np.ndarray,
    samples: int,
    seed: int,
    search: str,
    device: torch.device,
    scaling: str = "equilibrate",
):
    """(profile, wall seconds) of one run, the device synchronised before the clock stops."""
    start = time.perf_counter()
    profile = kruskal_profile(
        x, samples, seed=seed, scaling=scaling, device=device, search=search, workers=1
    )
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return profile, time.perf_counter() - start


def same(a: KruskalProfile, b: KruskalProfile) -> bool:
    """Whether two profiles agree on every m, P(k), bound and certificate."""
    return (
        np.array_equal(a.m, b.m)
        and np.array_equal(a.p, b.p)
        and (a.estimate, a.upper_bound, a.lower_bound) == (b.estimate, b.upper_bound, b.lower_bound)
        and a.certificates == b.certificates
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, default=256)
    parser.add_argument("--T", type=int, default=512)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--queries", type=Path, help="a (T, d) .npy file instead of random data")
    parser.add_argument("--device", default="cpu", help="device of the device search: cpu, cuda")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scaling", choices=SCALINGS, default="equilibrate")
    parser.add_argument(
        "--profile", type=Path, help="also profile one device search (torch.profiler) into it"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    x = np.load(args.queries) if args.queries else embedding_like(args.T, args.d, args.seed)
    print(
        f"T={x.shape[0]} d={x.shape[1]} dtype={x.dtype} S={args.samples} device={device} "
        f"scaling={args.scaling}"
    )
    timed(x[:64], 4, args.seed, "device", device)  # warm-up: kernels, the solver check
    walls: dict[str, list[float]] = {"host": [], "device": []}
    for _ in range(args.repeats):  # interleaved: the machine's drift hits both alike
        host, wall = timed(x, args.samples, args.seed, "host", torch.device("cpu"), args.scaling)
        walls["host"].append(wall)
        batched, wall = timed(x, args.samples, args.seed, "device", device, args.scaling)
        walls["device"].append(wall)
        if not same(host, batched):
            raise SystemExit(f"the searches disagree: {int((host.m != batched.m).sum())} m differ")
    print(f"identical m, profile, estimate ({host.estimate}) and certificates; median m "
          f"{int(np.median(host.m))} of {min(x.shape)}")  # fmt: skip
    medians = {name: statistics.median(values) for name, values in walls.items()}
    for name, values in walls.items():
        runs = " ".join(f"{v:.2f}" for v in values)
        print(f"{name:>6} search: median {medians[name]:.2f} s ({runs})")
    record(
        __file__,
        f"the Kruskal search batched over orderings on {device} vs the host search, results "
        f"identical (T={x.shape[0]} d={x.shape[1]} S={args.samples}, scaling {args.scaling})",
        medians["device"] / medians["host"],
        (f"batched on {device}", medians["device"], "s wall"),
        ("host search", medians["host"], "s wall"),
        ratio_is="device wall / host wall (medians)",
        repeats=args.repeats,
        settings=args,
    )
    if args.profile:
        profile_search(x, args, device)
    print(f"RATIO {medians['device'] / medians['host']:.3f}")


def profile_search(x: np.ndarray, args: argparse.Namespace, device: torch.device) -> None:
    """One more device search under torch.profiler: the ops by their own device and host time
    (what bounds the search: factorisations, gathers, or the host launching them)."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as run:
        timed(x, args.samples, args.seed, "device", device, args.scaling)
    averages = run.key_averages()
    tables = [averages.table(sort_by="self_cpu_time_total", row_limit=25)]
    if device.type == "cuda":
        tables.insert(0, averages.table(sort_by="self_cuda_time_total", row_limit=25))
    args.profile.parent.mkdir(parents=True, exist_ok=True)
    args.profile.write_text("\n\n".join(tables))
    print(f"profile: {args.profile}")


if __name__ == "__main__":
    main()
