"""Derive the cost model's rates (memcap.cluster.costs) from the committed measurements.

GPU, one H100: paper A's seconds per step of every timed batched model and the launches per
step of its profiled steps (benchmarks/gpu/paper_a_grid.json), the float64 SVD inside the
Kruskal profile (benchmarks/gpu/kruskal_profile.txt), the ordering search on the device and
on the host (bench_kruskal_device.json), paper B's seconds per sweep (gpu_sweeps.json) and the
scale audit's extractions and job starts (benchmarks/gpu/scale_audit.json). CPU, this 2-core
VM: the Snakemake benchmark files (``cpu_time`` of benchmarks/results/<rule>/*.tsv) of a
default run, given with ``--cpu-run`` (that run's checkout: its config, schema and files),
and bench_aot.json. Each rate is the largest of its measurements' seconds per unit of work,
so the model is at or above every one of them; the file keeps each measurement with its work
and its ratio of measured to modelled seconds (docs/cluster.md prints their spread).

    .venv/bin/python benchmarks/cluster_costs.py --cpu-run ../run1      # writes the file
    .venv/bin/python benchmarks/cluster_costs.py --check               # exit 1 when stale

``--check`` derives the GPU rates again from the committed files, and the CPU rates from the
run's config and CPU seconds that the file keeps (so a change of the cost model shows). The
file keeps 12 significant digits and the check compares within 1e-9 relative: the fits' last
digits differ between CPUs.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import yaml
from scipy.optimize import nnls

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from memcap.aot.cut import STAGE_JOB  # noqa: E402
from memcap.aot.settings import StageSettings as AotStage  # noqa: E402
from memcap.cluster import costs  # noqa: E402
from memcap.config_schema import validate_schema  # noqa: E402
from memcap.extract.depth import with_layers  # noqa: E402
from memcap.extract.entries import model_entries  # noqa: E402
from memcap.synthetic.settings import StageSettings, sweep_names, sweep_spec  # noqa: E402

GPU = ROOT / "benchmarks" / "gpu"
RESULTS = ROOT / "benchmarks" / "results"
# Assumed, not measured: the shortest kernel of a CUDA-graph replay (a batched model's step
# costs at least its kernels' count times this), and paper B's GPU steps bound by their
# launches (its timed sweeps of 35-55 replicas each take 23-26 s), so no per-row GPU rate.
KERNEL_S = 3e-6
# A CPU job's start: two Snakemake start-ups of about 3 s (docs/cluster.md) and torch's
# imports, about 2.5 s on this VM.
CPU_START_S = 8.5
# The CPU rules whose Snakemake benchmark files calibrate the CPU rates, by kind of work.
CPU_RULES = ("train_synthetic", "train_aot", "check_assumptions", "extract_model",
             "certify_real_capacity")  # fmt: skip
# Jobs and rules an older run named otherwise (the committed cpu_run's "rule/job" keys): one
# rule per stage, a job per sweep named by its {job} (memcap.synthetic.cut), paper B's one job
# by memcap.aot.cut.STAGE_JOB.
RENAMED_JOBS = {"train_aot/train_aot": f"train_aot/{STAGE_JOB}"}
RENAMED_RULES = {"run_synthetic_sweep": "train_synthetic"}


def resolved(config: Path, root: Path = ROOT) -> dict:
    """A config as a --configfile run sees it: the file alone, the schema's defaults in."""
    loaded = yaml.safe_load(config.read_text())
    validate_schema(loaded, root / "workflow" / "schemas" / "config.schema.yaml")
    return loaded


def measurement(kind: str, job: str, seconds: float, work: costs.Work) -> dict:
    """One measured job: what it did (its work units) and how long it took."""
    return {"kind": kind, "job": job, "seconds": seconds, "work": work}


def gpu_measurements() -> tuple[dict, list[dict]]:
    """GPU facts read as they are (device, kernels a step, job start) and every timed job."""
    grid = json.loads((GPU / "paper_a_grid.json").read_text())
    models = [m for s in grid["sweeps"].values() for m in s["models"] if m["measured"]]
    rows = []
    for m in models:
        flops = {f"synthetic_{m['contexts']}_flop": m["steps"] * m["padded_flops"]}
        work = {"synthetic_step": m["steps"], **flops}
        rows.append(measurement("paper A model", " ".join(m["key"]), m["grid_seconds"], work))
    launches = max(m["profile"]["launches_per_step"] for m in models if "profile" in m)
    device = json.loads((RESULTS / "bench_kruskal_device.json").read_text())
    settings = device["settings"]
    svd = _profile_seconds(GPU / "kruskal_profile.txt", "aten::_linalg_svd")
    work = {"svd_flop": costs.svd_flops(settings["T"], settings["d"])}
    rows.append(measurement("float64 SVD", f"{settings['T']} x {settings['d']}", svd, work))
    one_search = [(settings["samples"] / costs.SEARCHES, settings["d"])]
    for label, key, on_device in (("host", "baseline", False), ("device", "ours", True)):
        work = costs.checks_work(one_search, 1, on_device)
        job = f"S = {settings['samples']}"
        rows.append(measurement(f"Kruskal search, {label}", job, device[key]["median"], work))
    audit = json.loads((GPU / "scale_audit.json").read_text())
    scale = model_entries(resolved(ROOT / "configs" / "scale.yaml"))
    layers = {e.name: len(with_layers(e).layers) for e in scale}
    starts = []
    for name, run in audit["models"].items():
        work = costs.extract_work(run["T"], run["n"], layers[name])
        rows.append(measurement("extraction", name, run["extract_seconds"], work))
        starts.append(run["snakemake_wall_seconds"] - run["extract_job_seconds"])
    rows += _aot_gpu()
    facts = {
        "device": grid["device"],
        "start_s": round(max(starts), 2),
        "synthetic_step": launches * KERNEL_S,
    }
    return facts, rows


def _aot_gpu() -> list[dict]:
    """Paper B's timed sweeps: their summary's upper figure, each sweep's batched models as
    they were when timed (padded)."""
    summary = json.loads((RESULTS / "gpu_sweeps.json").read_text())["summary"]
    found = re.search(r"(\d+)–(\d+) s wall per sweep \(([^)]*)\)", summary)
    paper = resolved(ROOT / "configs" / "paper.yaml")
    engine = {**paper["engine"], "aot": {"pad_replicas": True}}
    stage = AotStage.from_config(paper["aot"], paper["seed"], engine)
    rows = []
    for name in (n.strip() for n in found[3].split(",")):
        steps = costs.aot_work(name, paper["aot"]["sweeps"][name], stage)["aot_step"]
        rows.append(measurement("paper B sweep", name, float(found[2]), {"aot_step": steps}))
    return rows


def _profile_seconds(path: Path, op: str) -> float:
    """Seconds per call of ``op`` in a torch.profiler table: its CPU total over its calls."""
    units = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
    for line in path.read_text().splitlines():
        cells = line.split()
        if cells and cells[0] == op:
            number, unit = re.fullmatch(r"([0-9.]+)(us|ms|s)", cells[4]).groups()
            return float(number) * units[unit] / int(cells[-1])
    raise ValueError(f"{op} is not in {path}")


def current_name(key: str) -> str:
    """A "rule/job" key of a run by the workflow's names of now (an older run's renamed)."""
    rule, _, job = RENAMED_JOBS.get(key, key).partition("/")
    return f"{RENAMED_RULES.get(rule, rule)}/{job}"


def cpu_measurements(config: dict, seconds: dict[str, float]) -> list[dict]:
    """Every compute job of a default run: its CPU seconds (``seconds``, by "rule/job", names
    of an older run mapped onto today's) and its work under the run's resolved ``config``."""
    rows = []
    seconds = {current_name(key): value for key, value in seconds.items()}

    def add(rule: str, job: str, work: costs.Work) -> None:
        rows.append(measurement(rule, job, seconds[f"{rule}/{job}"], work))

    section = config["synthetic"]
    stage = StageSettings.from_config(section, config["seed"], config["engine"])
    for name in sweep_names(section):
        add("train_synthetic", name, costs.synthetic_work(sweep_spec(section, name), stage))
    aot = AotStage.from_config(config["aot"], config["seed"], config["engine"])
    sweeps = config["aot"]["sweeps"]
    add("train_aot", STAGE_JOB, costs.add(*(costs.aot_work(n, sweeps[n], aot) for n in sweeps)))
    checks, capacity = config["assumptions"], config["capacity"]
    for entry in (with_layers(e) for e in model_entries(config)):
        T, n, d = costs.model_sizes(entry)
        layers = [(checks["samples"], d)] * len(entry.detail_layers)
        layers += [(checks["depth_samples"], d)] * len(entry.depth_rows)
        add("check_assumptions", entry.name, costs.checks_work(layers, 1, False))
        add("extract_model", entry.name, costs.extract_work(T, n, len(entry.layers)))
        if entry.detail_layers:
            used = min(T, capacity["max_T"] or T)
            work = costs.certify_work(used, capacity["max_H"], d, len(entry.detail_layers))
            add("certify_real_capacity", entry.name, work)
    rows.append(_bench_aot())
    return rows


def _bench_aot() -> dict:
    """bench_aot.json: one step of each of its shapes' batched models, summed."""
    from bench_aot import SEEDS, SHAPES

    bench = json.loads((RESULTS / "bench_aot.json").read_text())
    shapes = [SHAPES[s] for s in bench["settings"]["shapes"]]
    work = {
        "aot_step": float(len(shapes)),
        "aot_row": float(sum(len(kinds) * SEEDS * batch for _, batch, kinds in shapes)),
    }
    seconds = bench["ours"]["median"] / 1000
    return measurement("bench_aot", "one step of each shape", seconds, work)


def run_seconds(run: Path) -> dict[str, float]:
    """CPU seconds of every job of a run, by "rule/job", from its Snakemake benchmark files
    (a default run's: one file a job, none in a subfolder)."""
    seconds = {}
    for rule in CPU_RULES:
        for path in sorted((run / "benchmarks" / "results" / rule).glob("*.tsv")):
            with path.open() as table:
                row = next(csv.DictReader(table, delimiter="\t"))
            seconds[f"{rule}/{path.stem}"] = float(row["cpu_time"])
    return seconds


def fit(rows: list[dict], facts: dict[str, float]) -> dict[str, float]:
    """Rates of every unit: ``facts`` as given, the others from ``rows``, fewest unknowns
    first. A unit that rows do alone (beside known ones) gets the largest of their seconds per
    unit; rows sharing several unknown units get a non-negative least-squares split, scaled
    up until it covers each of them."""
    rates = dict.fromkeys(costs.UNITS, 0.0) | facts
    known = set(facts)
    groups: dict[tuple[str, ...], list[dict]] = {}
    for row in rows:
        free = tuple(sorted(u for u, w in row["work"].items() if w and u not in known))
        groups.setdefault(free, []).append(row)
    for units, group in sorted(groups.items(), key=lambda item: len(item[0])):
        if not units:
            continue
        rest = [r["seconds"] - _seconds(r["work"], rates, skip=units) for r in group]
        scale = [max(r["work"][u] for r in group) for u in units]
        matrix = [
            [r["work"].get(u, 0.0) / k for u, k in zip(units, scale, strict=True)] for r in group
        ]
        split = nnls(matrix, rest)[0] if len(units) > 1 else [1.0]
        trial = {u: s / k for u, s, k in zip(units, split, scale, strict=True)}
        cover = max(s / _seconds(r["work"], trial) for s, r in zip(rest, group, strict=True))
        rates.update({u: trial[u] * cover for u in units})
        known |= set(units)
    return rates


def _seconds(work: costs.Work, rates: dict[str, float], skip: tuple[str, ...] = ()) -> float:
    return sum(w * rates.get(u, 0.0) for u, w in work.items() if u not in skip)


def _one_flop_rate(row: dict) -> dict:
    """A CPU row of paper A with its shared and random FLOPs as one unit (one rate on a CPU)."""
    work = dict(row["work"])
    work["synthetic_shared_flop"] += work.pop("synthetic_random_flop")
    return {**row, "work": work}


def derive(gpu_facts: dict, gpu_rows: list[dict], cpu_rows: list[dict]) -> dict:
    """The cost file: both kinds' rates, and every measurement with its modelled seconds."""
    gpu = fit(gpu_rows, {"synthetic_step": gpu_facts["synthetic_step"], "aot_row": 0.0})
    paper_a = [r for r in cpu_rows if r["kind"] == "train_synthetic"]
    cpu = fit([r for r in cpu_rows if r not in paper_a], {})
    known = {u: v for u, v in cpu.items() if v} | {"svd_flop": cpu["certify_flop"]}
    cpu = fit([_one_flop_rate(r) for r in paper_a], known)
    cpu["synthetic_random_flop"] = cpu["synthetic_shared_flop"]
    cpu["device_ordering"] = cpu["ordering"]  # no device: the batched search on the host
    gpu["certify_flop"] = cpu["certify_flop"]  # certified capacity runs on the host
    tables = {
        "gpu": {"device": gpu_facts["device"], "start_s": gpu_facts["start_s"], **gpu},
        "cpu": {"device": "2-core VM, one thread a job", "start_s": CPU_START_S, **cpu},
    }
    measured = []
    for kind, rows in (("gpu", gpu_rows), ("cpu", cpu_rows)):
        rates = costs.Rates(**tables[kind])
        for row in rows:
            model = costs.work_seconds(row["work"], rates)
            measured.append(row | {"device": kind, "model": model, "ratio": row["seconds"] / model})
    assumed = {"kernel_s": KERNEL_S, "cpu_start_s": CPU_START_S}
    return {"rates": tables, "assumed": assumed, "measured": measured}


def rounded(value: object) -> object:
    """``value`` with every float at 12 significant digits: the fits' last digits move with
    the CPU's BLAS (1.9784126489808007e-13 on one AMD EPYC, ...8002e-13 on Intel)."""
    if isinstance(value, float):
        return float(f"{value:.12g}")
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [rounded(v) for v in value]
    return value


def same(a: object, b: object, rel: float = 1e-9) -> bool:
    """Equal structures whose numbers agree within ``rel``: a rounded digit that flips
    between CPUs (a 1e-12 relative step) is not staleness, a changed measurement is."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], rel) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y, rel) for x, y in zip(a, b, strict=True))
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool):
        return math.isclose(a, b, rel_tol=rel, abs_tol=0.0)
    return a == b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu-run", type=Path, help="checkout of a finished default run")
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    parser.add_argument("--out", type=Path, default=ROOT / costs.COSTS_FILE)
    args = parser.parse_args()
    facts, gpu_rows = gpu_measurements()
    committed = json.loads(args.out.read_text()) if args.out.exists() else None
    if args.cpu_run is not None:
        config = resolved(args.cpu_run / "config.yaml", args.cpu_run)
        run = {
            "config": config,
            "seconds": run_seconds(args.cpu_run),
            "commit": _commit(args.cpu_run),
        }
    elif committed is not None:
        run = committed["cpu_run"]
    else:
        parser.error("no committed cost file: give --cpu-run")
    cpu_rows = cpu_measurements(run["config"], run["seconds"])
    derived = rounded(derive(facts, gpu_rows, cpu_rows) | {"cpu_run": run})
    text = json.dumps(derived, indent=1, sort_keys=True)
    if args.check:
        current = committed is not None and same(committed, derived)
        print(f"{args.out} is {'current' if current else 'stale: run it without --check'}")
        sys.exit(0 if current else 1)
    args.out.write_text(text + "\n")
    for row in json.loads(text)["measured"]:
        print(
            f"{row['device']} {row['kind']:<22} {row['job']!s:<40} {row['seconds']:9.2f} s"
            f" measured, {row['model']:9.2f} s modelled, ratio {row['ratio']:.2f}"
        )
    print(f"-> {args.out}")


def _commit(path: Path) -> str:
    result = subprocess.run(
        ["git", "-C", str(path), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return result.stdout.strip() or "unknown"


if __name__ == "__main__":
    main()
