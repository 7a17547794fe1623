"""Time paper A's whole synthetic grid on this machine and write one JSON.

Every batched model of every sweep of the config's ``synthetic`` section (batched by
``engine.synthetic``'s group_by and max_padding, or the overrides below) is built with its data
and timed: a warm-up run (which compiles, with --compile), one evaluation, then --max-steps
training steps. Its share of the grid is its full step count (the authors' recipe: max(500 T /
256, 50,000) steps, 300,000 for the d_h sweep) times the seconds per step, plus one evaluation
per eval_every steps. Models run one after another on one device; replicas leaving early
(leave_when_fit) are not counted, so ``grid_hours`` is an upper bound on that account.
``--models-per-sweep K`` times K models of each sweep and context kind (the costliest, the
cheapest and evenly between, by padded FLOPs; models of shared contexts run the one-context
core) and extrapolates the others by their padded FLOPs at the seconds per padded FLOP
measured on models of their kind.

    PYTHONPATH=src python benchmarks/paper_a_grid.py configs/paper.yaml --max-steps 200 \\
        --precision bf16 --compile --commit <sha> --out benchmarks/gpu/paper_a_grid.json

On the CPU in seconds (a smoke test of the whole path, tiny config):

    PYTHONPATH=src python benchmarks/paper_a_grid.py configs/test.yaml --max-steps 3 \\
        --warmup 2 --out "$(mktemp -d)/paper_a_grid.json"

The config is a YAML validated against the schema (needs jsonschema) or the JSON written by
``gpu_sweeps.py resolve``. Prints one line per model and the grid total.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import subprocess
import time
from pathlib import Path

import torch

from memcap.synthetic.settings import (
    StageSettings,
    replica_groups,
    step_cost,
    step_shape,
    sweep_names,
    sweep_spec,
)
from memcap.synthetic.sweep import batched_model, member_datasets
from memcap.training.loop import evaluate, matmul_precision, train_replicas

ROOT = Path(__file__).resolve().parents[1]
# Dense peak TFLOP/s (no 2:4 sparsity) per precision. Sources: NVIDIA H100 Tensor Core GPU
# datasheet (SXM5: FP32 67, TF32 989 and BF16 1,979 "with sparsity", halved without; PCIe:
# 51, 756, 1,513), as reprinted by hpctech.co.jp; G. Lockwood's H100 page (66.9, 494.7,
# 989.4 dense). NVIDIA's H200 datasheet gives the H100 SXM5's compute figures.
PEAK_TFLOPS = {
    "H100 PCIe": {"float32": 51.2, "tf32": 378.0, "bf16": 756.0},
    "H100": {"float32": 66.9, "tf32": 494.7, "bf16": 989.4},
    "H200": {"float32": 66.9, "tf32": 494.7, "bf16": 989.4},
}


def load_config(path: str) -> dict:
    """A resolved JSON config, or what a ``--configfile`` run of a YAML sees: config.yaml
    updated by it (as Snakemake merges them), validated (defaults filled) against the schema."""
    if path.endswith(".json"):
        return json.loads(Path(path).read_text())
    import yaml
    from snakemake.utils import update_config

    from memcap.config_schema import validate_schema

    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    update_config(config, yaml.safe_load(Path(path).read_text()))
    validate_schema(config, ROOT / "workflow" / "schemas" / "config.schema.yaml")
    return config


def device_peak(device: torch.device, precision: str) -> tuple[float, str]:
    """Peak TFLOP/s at ``precision`` and where it comes from (measured matmul elsewhere)."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        for key, peaks in PEAK_TFLOPS.items():  # "H100 PCIe" before "H100"
            if key in name:
                return peaks[precision], f"datasheet ({key}, dense)"
    return matmul_tflops(device, precision), "measured 2048^2 matmul at this precision"


def matmul_tflops(device: torch.device, precision: str, size: int = 2048) -> float:
    """Median TFLOP/s of a square matmul at ``precision`` (bf16: bfloat16 operands)."""
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    a, b = (torch.rand(size, size, device=device, dtype=dtype) for _ in range(2))
    times = []
    with matmul_precision(precision, device):
        for _ in range(5):
            _sync(device)
            start = time.perf_counter()
            a @ b
            _sync(device)
            times.append(time.perf_counter() - start)
    return 2 * size**3 / statistics.median(times) / 1e12


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_model(
    spec, stage, members, device, warmup: int, steps: int, profile_steps: int = 0
) -> dict:
    """Seconds per training step and per evaluation of one batched model of ``members``."""
    cfg = stage.train_config(spec, max(r.T for r in members))
    datasets = member_datasets(spec, stage, members)
    model, data, seeds = batched_model(spec, stage, members, datasets, device, cfg.batch_size)
    task = members[0].setting.task

    def train(count: int) -> float:
        short = dataclasses.replace(
            cfg,
            steps=count,
            eval_every=count,
            early_stop=False,
            leave_when_fit=False,
            extra_budgets=0,
        )
        _sync(device)
        start = time.perf_counter()
        train_replicas(model, data, task, short, seeds)
        _sync(device)
        return time.perf_counter() - start

    train(warmup)  # compiles (--compile) and warms the allocator and kernels
    _sync(device)
    start = time.perf_counter()
    evaluate(model, data, task, cfg.regression_tol)
    _sync(device)
    evaluation = time.perf_counter() - start
    run = train(steps)  # its steps, plus an evaluation before and after
    timing = {
        "seconds_per_step": max(run - 2 * evaluation, 0.0) / steps,
        "seconds_per_evaluation": evaluation,
        "measured_seconds": run,
    }
    if profile_steps:
        timing["profile"] = profiled(lambda: train(profile_steps), profile_steps, device)
    return timing


def profiled(run, steps: int, device: torch.device) -> dict:
    """What bounds a step: torch.profiler over ``run`` (``steps`` training steps and two
    evaluations). ``device_busy`` is the kernels' summed time over the wall time (near 1:
    the arithmetic or memory bounds the step; well below: launches and the host do), with
    the kernels launched per step and the five costliest kernels."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    _sync(device)
    start = time.perf_counter()
    with profile(activities=activities) as prof:
        run()
        _sync(device)
    wall = time.perf_counter() - start
    events = prof.key_averages()
    kernels = [e for e in events if e.device_type.name == "CUDA"]
    busy = sum(e.self_device_time_total for e in kernels) / 1e6
    launches = sum(
        e.count
        for e in events
        if e.key in ("cudaLaunchKernel", "cuLaunchKernel", "cudaGraphLaunch")
    )
    top = sorted(kernels, key=lambda e: -e.self_device_time_total)[:5]
    return {
        "steps": steps,
        "wall_seconds": wall,
        "device_busy": busy / wall if device.type == "cuda" else None,
        "launches_per_step": launches / steps,
        "top_kernels": [
            {"name": e.key[:120], "share": e.self_device_time_total / 1e6 / busy, "count": e.count}
            for e in top
        ]
        if busy
        else [],
    }


def chosen(costs: list[float], count: int | None) -> set[int]:
    """Positions of ``count`` models spread over ``costs`` (all when None)."""
    if count is None or count >= len(costs):
        return set(range(len(costs)))
    order = sorted(range(len(costs)), key=lambda i: -costs[i])
    return {order[round(k * (len(order) - 1) / max(count - 1, 1))] for k in range(count)}


def time_sweep(name: str, config: dict, args, device) -> dict:
    """Every batched model of sweep ``name``: measured or extrapolated seconds."""
    section = config["synthetic"]
    spec = sweep_spec(section, name)
    stage = StageSettings.from_config(section, config["seed"], config["engine"])
    models = []
    for key, members in replica_groups(spec, stage).items():
        cfg = stage.train_config(spec, max(r.T for r in members))
        cost = step_cost(stage, members[0].setting.task, cfg.eval_every)
        shapes = [step_shape(r, cfg.batch_size) for r in members]
        padded, own = cost.bucket(shapes)
        needed = sum(cost.needed(s) for s in shapes)
        kinds = {r.setting.context for r in members}
        models.append(
            {"key": [str(k) for k in key], "members": members, "replicas": len(members),
             "contexts": kinds.pop() if len(kinds) == 1 else "both",
             "steps": cfg.steps, "evaluations": math.ceil(cfg.steps / cfg.eval_every),
             "padded_flops": padded, "own_flops": own, "needed_flops": needed}
        )  # fmt: skip
    timed = set()  # K models of each context kind: shared contexts run another core
    for kind in dict.fromkeys(m["contexts"] for m in models):
        positions = [k for k, m in enumerate(models) if m["contexts"] == kind]
        picked = chosen([models[k]["padded_flops"] for k in positions], args.models_per_sweep)
        timed |= {positions[k] for k in picked}
    for k, model in enumerate(models):
        members = model.pop("members")
        if k in timed:
            profile_steps = args.profile_steps if k == min(timed) else 0
            model |= time_model(
                spec, stage, members, device, args.warmup, args.max_steps, profile_steps
            )
            model["measured_steps"] = args.max_steps
            print(name, model["key"], {key: model[key] for key in ("replicas", "seconds_per_step")})
    for model in models:
        model["measured"] = "measured_steps" in model
        if not model["measured"]:  # seconds per padded FLOP of the timed models of its kind
            alike = [
                m for m in models if "measured_steps" in m and m["contexts"] == model["contexts"]
            ]
            for field in ("seconds_per_step", "seconds_per_evaluation"):
                rate = statistics.median(m[field] / m["padded_flops"] for m in alike)
                model[field] = rate * model["padded_flops"]
        model["grid_seconds"] = (
            model["steps"] * model["seconds_per_step"]
            + model["evaluations"] * model["seconds_per_evaluation"]
        )
    return summarize_sweep(models)


def summarize_sweep(models: list[dict]) -> dict:
    """The sweep's totals over its batched models."""
    measured = [m for m in models if m["measured"]]
    steps = sum(m["steps"] for m in models)
    grid_seconds = sum(m["grid_seconds"] for m in models)
    measured_seconds = sum(m["measured_steps"] * m["seconds_per_step"] for m in measured)
    needed = sum(m["measured_steps"] * m["needed_flops"] for m in measured)
    return {
        "replicas": sum(m["replicas"] for m in models),
        "batched_models": len(models),
        "steps": steps,
        "measured_steps": sum(m["measured_steps"] for m in measured),
        "seconds_per_step": grid_seconds / steps,
        "measured_seconds": measured_seconds,
        "grid_seconds": grid_seconds,
        "achieved_tflops": needed / measured_seconds / 1e12 if measured_seconds else None,
        "padding": sum(m["padded_flops"] * m["steps"] for m in models)
        / sum(m["own_flops"] * m["steps"] for m in models)
        - 1.0,
        "models": models,
    }


def commit_of(given: str | None) -> str:
    if given:
        return given
    try:
        return subprocess.check_output(["git", "rev-parse", "HEAD"], cwd=ROOT, text=True).strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (pass --commit)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", help="YAML config (schema-validated) or resolved JSON")
    parser.add_argument("--max-steps", type=int, default=200, help="timed steps per model")
    parser.add_argument("--warmup", type=int, default=20, help="untimed steps first")
    parser.add_argument("--models-per-sweep", type=int, default=None)
    parser.add_argument("--sweeps", nargs="*", default=None, help="default: every enabled")
    parser.add_argument("--precision", choices=["float32", "tf32", "bf16"], default=None)
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--cuda-graph", action="store_true", help="engine.cuda_graph")
    parser.add_argument("--max-padding", type=float, default=None)
    parser.add_argument("--group-by", nargs="*", default=None)
    parser.add_argument(
        "--profile-steps", type=int, default=0, help="profile this many steps of one model a sweep"
    )
    parser.add_argument("--commit", default=None)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "gpu" / "paper_a_grid.json"))
    args = parser.parse_args()
    from memcap.devices import resolve_device

    config = load_config(args.config)
    engine, batching = config["engine"], config["engine"]["synthetic"]
    if args.precision is not None:
        engine["precision"] = args.precision
    engine["compile"] = args.compile or engine["compile"]
    engine["cuda_graph"] = args.cuda_graph or engine.get("cuda_graph", False)
    overrides = {"max_padding": args.max_padding, "group_by": args.group_by}
    batching |= {key: value for key, value in overrides.items() if value is not None}
    device = resolve_device("auto")
    peak, peak_source = device_peak(device, engine["precision"])
    report = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "precision": engine["precision"],
        "compile": engine["compile"],
        "cuda_graph": engine["cuda_graph"],
        "group_by": batching["group_by"],
        "max_padding": batching["max_padding"],
        "commit": commit_of(args.commit),
        "torch": torch.__version__,
        "config": args.config,
        "peak_tflops": peak,
        "peak_source": peak_source,
        "sweeps": {},
        "extrapolated": (
            "every model's steps beyond measured_steps (seconds per step x its full step "
            "count, plus its evaluations); models with measured false from the measured ones' "
            "seconds per padded FLOP; replicas leaving early not counted (an upper bound)"
        ),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    sweeps = report["sweeps"]
    for name in args.sweeps or sweep_names(config["synthetic"]):
        sweeps[name] = time_sweep(name, config, args, device)
        sweeps[name]["fraction_of_peak"] = (sweeps[name]["achieved_tflops"] or 0.0) / peak
        print(name, {k: v for k, v in sweeps[name].items() if k != "models"}, flush=True)
        report["grid_hours"] = sum(s["grid_seconds"] for s in sweeps.values()) / 3600
        # after every sweep: a run cut short keeps the sweeps it finished
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(f"grid_hours {report['grid_hours']:.3f} on {report['device']} -> {args.out}")


if __name__ == "__main__":
    main()
