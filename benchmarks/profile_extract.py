"""Where one extraction job's time goes: a model of a config, profiled stage by stage.

Runs :func:`memcap.extract.job.extract_layers` on one model of a config (schema defaults
filled, every layer the workflow would extract, contexts of the detail layers) under cProfile,
and splits the job's thread's time into its stages by the functions that do them: building the
model, the inputs (corpus, tokenizer, windows or images), the forward passes, copies from the
device, the context ranks (the stream's share on this thread; on a GPU the host's solves run
on a pool and show here only as waits), the writes, the rest. Prints the stages, the
functions with the most own time, the process CPU seconds (all threads) against the wall, and
with ``--out`` writes them as JSON. No comparison, so no RATIO: it names what bounds the job.

    .venv/bin/python benchmarks/profile_extract.py config.yaml --model gpt2-small-random
    python benchmarks/profile_extract.py configs/scale.yaml --model gpt2-large-random \\
        --T 512 --device cuda --out profile.json                         # on a GPU
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import resource
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def stage_functions() -> dict[str, list[tuple[str, int, str]]]:
    """Stage -> the functions whose cumulative time is that stage, as cProfile names them."""
    from memcap.extract import inputs, registry, store, text
    from memcap.extract.images import image_batches
    from memcap.extract.layers import MultiLayerExtractor
    from memcap.numerics.context_rank import ContextRankStream

    def key(function) -> tuple[str, int, str]:
        code = function.__code__
        return (code.co_filename, code.co_firstlineno, code.co_name)

    return {
        "model": [key(registry.create_model)],
        "inputs": [key(inputs.prepare_inputs), key(text.text_batches), key(image_batches)],
        "forward": [key(MultiLayerExtractor.forward)],
        "device copies": [("~", 0, "<method 'cpu' of 'torch._C.TensorBase' objects>")],
        "context ranks": [key(ContextRankStream.add), key(ContextRankStream.result)],
        "writes": [key(store.ChunkedArrayWriter.write), key(store.OrderedWrites.wait)],
    }


def entry_of(config_path: Path, model: str, T: int | None):
    """The typed entry of ``model``, its layers resolved, T replaced when given."""
    from memcap.config_schema import validate_schema
    from memcap.extract.depth import with_layers
    from memcap.extract.entries import model_entry

    config = yaml.safe_load(config_path.read_text())
    validate_schema(config, ROOT / "workflow" / "schemas" / "config.schema.yaml")
    names = [m["name"] for m in config["extract"]["models"]]
    if model not in names:
        raise SystemExit(f"--model {model}: not in {config_path.name} ({names})")
    index = names.index(model)
    entry = with_layers(model_entry(config["extract"]["models"][index], index, config["seed"]))
    if T is not None:
        entry = replace(entry, data=replace(entry.data, T=T))
    return entry, config


def stage_seconds(stats: pstats.Stats) -> dict[str, float]:
    """Cumulative seconds of each stage's functions (calls nested in another stage count in
    both: the device copies happen inside the loop's writes and the ranks' Gram step)."""
    stages = stage_functions()
    found = {
        stage: sum(stats.stats[k][3] for k in keys if k in stats.stats)
        for stage, keys in stages.items()
    }
    return {stage: round(seconds, 2) for stage, seconds in found.items()}


def top_functions(stats: pstats.Stats, count: int) -> list[dict]:
    """The ``count`` functions with the most own time."""
    rows = sorted(stats.stats.items(), key=lambda item: -item[1][2])[:count]
    return [
        {"function": f"{Path(file).name}:{line}({name})", "calls": calls, "own_seconds": own}
        for (file, line, name), (_, calls, own, _, _) in rows
    ]


@contextmanager
def torch_profiler(path: Path | None, device: str) -> Iterator[None]:
    """torch.profiler around the job when ``path`` is given: the ops by their own device time
    (on a GPU) and host time, as tables in ``path``."""
    if path is None:
        yield
        return
    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if device != "cpu" and torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as run:
        yield
    averages = run.key_averages()
    sorts = ["self_cuda_time_total"] if len(activities) > 1 else []
    tables = [averages.table(sort_by=key, row_limit=25) for key in [*sorts, "self_cpu_time_total"]]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n\n".join(tables))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("--model", required=True)
    parser.add_argument("--T", type=int, help="examples (default: the config's)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the rule's)")
    parser.add_argument(
        "--checkpoint", type=Path, help="a converted checkpoint (ONNX weights: the workflow's)"
    )
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument(
        "--clock",
        choices=["cpu", "wall"],
        help="what the profile counts: this thread's CPU seconds (default on the CPU, where "
        "a shared machine's wall time is noise) or wall seconds (default on a GPU: waits count)",
    )
    parser.add_argument("--out", type=Path, help="write the profile as JSON")
    parser.add_argument(
        "--torch-profile", type=Path, help="also write torch.profiler's op tables (a GPU's time)"
    )
    args = parser.parse_args()
    from memcap.extract.config import ExtractSettings
    from memcap.extract.job import ExtractOutputs, extract_layers
    from memcap.extract.layer_spec import layer_name

    entry, config = entry_of(args.config, args.model, args.T)
    settings = ExtractSettings(
        batch_size=config["extract"]["batch_size"],
        device=args.device,
        context_rtol=config["assumptions"]["context_rtol"],
    )
    with tempfile.TemporaryDirectory() as tmp:
        outputs = {}
        for layer in entry.layers:
            folder = Path(tmp) / layer_name(layer)
            contexts = folder / "contexts.npy" if layer in entry.detail_layers else None
            outputs[layer] = ExtractOutputs(
                folder / "queries.npy", contexts, folder / "provenance.json", folder / "r.npz"
            )
        clock = args.clock or ("cpu" if settings.device == "cpu" else "wall")
        profiler = cProfile.Profile(time.thread_time if clock == "cpu" else time.perf_counter)
        cpu, wall = time.process_time(), time.perf_counter()
        with torch_profiler(args.torch_profile, settings.device):
            profiler.enable()
            records = extract_layers(entry, outputs, settings, args.threads, args.checkpoint)
            profiler.disable()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    stats = pstats.Stats(profiler)
    first = next(iter(records.values()))
    stages = stage_seconds(stats)
    result = {
        "config": str(args.config),
        "model": args.model,
        "device": first["device"],
        "T": first["T"],
        "n": first["n"],
        "d": first["d"],
        "layers": len(records),
        "clock": clock,
        "wall_seconds": round(wall, 2),
        "cpu_seconds": round(cpu, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "windows_per_second": round(first["T"] / wall, 2),
        "stages": stages,
        "context_rank_seconds": round(
            sum(r["context_rank_seconds"] or 0 for r in records.values()), 2
        ),
        "top_functions": top_functions(stats, args.top),
    }
    print(
        f"{args.model}: T = {result['T']}, n = {result['n']}, d = {result['d']}, "
        f"{result['layers']} layers on {result['device']}: {wall:.1f} s wall, {cpu:.1f} s CPU"
    )
    total = cpu if clock == "cpu" else wall
    print(f"stages ({clock} seconds, share of the job's {total:.1f} s):")
    for stage, seconds in stages.items():
        print(f"  {stage:14s} {seconds:8.2f} s  {seconds / total:6.1%}")
    print(f"functions with the most own time ({clock} seconds, calls):")
    for row in result["top_functions"]:
        print(f"  {row['own_seconds']:8.2f} s  {row['calls']:7d}  {row['function']}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
