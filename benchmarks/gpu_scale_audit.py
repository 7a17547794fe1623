"""Time the scale audit (configs/scale.yaml): every block of one model, one GPU.

With ``--run --model NAME`` runs the Snakemake workflow up to the model's check job
(extraction of every block, then every layer's checks) and, finished or not, writes what the
run left into one JSON: per model its sizes (parameters, d, blocks, T, n, S), the device, the
commit, the wall seconds of each stage, windows per second, the context ranks' and Kruskal
searches' seconds and the peak GPU memory - read from the rules' benchmark files (wall seconds
per job), the extraction's provenance, the check job's depth rows and the jobs' logs. A run cut by
``--timeout`` (or a failed job) is recorded as ``partial`` (``extracted`` when only the checks
are missing, as after ``--stage extract``), with how far the extraction got and how many
layers were checked. Models already in ``--out`` and not measured now are kept.

    python benchmarks/gpu_scale_audit.py --run --model gpt2-large-random --timeout 420 \\
        --commit <sha>                                  # on the GPU machine, one model a call
    python benchmarks/gpu_scale_audit.py --root /path/to/run    # read a finished run
    python benchmarks/gpu_scale_audit.py --run --model gpt2-large-random --print-only

Prints one line per model; ``total_seconds`` is the sum of the model's job wall times
(extraction, checks and, when a target asks for it, certified capacity).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
PEAK_LINE = re.compile(r"peak GPU memory: ([0-9.]+|None) GB")
PROGRESS = re.compile(r"(\d+)/(\d+) \[([0-9:]+)<")  # tqdm: done/total [elapsed<left
CHECKED_LINE = re.compile(r"layer (\S+): P\(n\) = ")
STAGES = {"extract": "extract_model", "check": "check_assumptions"}
STAGES["capacity"] = "certify_real_capacity"


def audit_targets(models: list[str], stage: str = "audit") -> list[str]:
    """The Snakemake targets of each model's audit: its check job's folder (every layer
    checked, each with its depth row), or for ``extract`` its extraction folder (every layer)."""
    folder = "extract" if stage == "extract" else "assumptions/jobs"
    return [f"results/{folder}/{model}" for model in models]


def snakemake_command(
    root: Path, config: Path, cores: int, targets: list[str], python: str = sys.executable
) -> list[str]:
    """The workflow's command line: targets first, then ``--configfile=`` (one value), so that
    no target is read as another config file. The checks run in the model cut whatever the
    config's ``assumptions.cut``: the audit reads one check job's log per model."""
    workflow = [python, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-d", str(root)]
    one_job = ["--config", "assumptions={cut: model}"]
    return [*workflow, *targets, *one_job, "--cores", str(cores), f"--configfile={config}"]


def run_workflow(command: list[str], timeout: float | None) -> tuple[float, str]:
    """Run ``command`` in its own process group; at ``timeout`` seconds stop the group (Snakemake
    and its jobs; SIGTERM, SIGKILL 30 s later). Returns (wall seconds, how it ended)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, start_new_session=True)
    try:
        code = process.wait(timeout=timeout)
        ended = "finished" if code == 0 else f"failed (exit {code})"
    except subprocess.TimeoutExpired:
        ended = f"stopped at the {timeout:.0f} s timeout"
        for sig, grace in ((signal.SIGTERM, 30), (signal.SIGKILL, None)):
            try:
                os.killpg(process.pid, sig)
                process.wait(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
            except ProcessLookupError:
                break
    return round(time.perf_counter() - start, 1), ended


def job_seconds(root: Path, rule: str, model: str) -> float | None:
    """Wall seconds of a rule's job for ``model`` (its Snakemake benchmark file), if it ran."""
    path = root / "benchmarks" / "results" / rule / f"{model}.tsv"
    return float(pd.read_csv(path, sep="\t")["s"].iloc[0]) if path.is_file() else None


def logged_peak_gb(path: Path) -> float | None:
    """The peak GPU memory a check job logged (None: not on CUDA, or no such line)."""
    found = PEAK_LINE.findall(path.read_text()) if path.is_file() else []
    return float(found[-1]) if found and found[-1] != "None" else None


def extraction_progress(path: Path) -> str | None:
    """How far an extraction's progress bar got (its log), e.g. ``900/2000 windows in 0:01:40``."""
    text = path.read_text(errors="replace") if path.is_file() else ""
    found = PROGRESS.findall(text)
    return f"{found[-1][0]}/{found[-1][1]} windows in {found[-1][2]}" if found else None


def checked_layers(path: Path) -> int:
    """Layers a check job finished (one log line each)."""
    return len(CHECKED_LINE.findall(path.read_text())) if path.is_file() else 0


def depth_parts(checks: Path) -> list[dict[str, Any]]:
    """The depth rows and profiles of a model's check job (its folder ``checks``), by layer."""
    from memcap.assumptions.job import DEPTH_PART, read_parts

    return read_parts(sorted(path.parent for path in checks.glob(f"*/{DEPTH_PART}")))


def model_timings(root: Path, model: str, samples: int) -> dict[str, Any]:
    """One model's sizes, seconds per stage and peak GPU memory, from what a run left."""
    logs = root / "logs"
    stages = {f"{s}_seconds": job_seconds(root, rule, model) for s, rule in STAGES.items()}
    record: dict[str, Any] = {
        **stages,
        "total_seconds": round(sum(s for s in stages.values() if s is not None), 2),
        "extract_progress": extraction_progress(logs / "extract_model" / f"{model}.log"),
        "checked_layers": checked_layers(logs / "check_assumptions" / f"{model}.log"),
    }
    extract = root / "results" / "extract" / model
    records = [json.loads(p.read_text()) for p in sorted(extract.glob("*/provenance.json"))]
    peaks = [logged_peak_gb(logs / "check_assumptions" / f"{model}.log")]
    if records:
        first = records[0]
        record |= {
            "params": first["parameters"],
            "precision": first["precision"],
            "d": first["d"],
            "blocks": first["depth"],
            "layers": len(records),
            "T": first["T"],
            "n": first["n"],
            "S": samples,
            "device": first["device"],
            "extract_job_seconds": first["seconds"],  # in the job, imports excluded
            "context_rank_seconds": round(
                sum(r.get("context_rank_seconds") or 0 for r in records), 2
            ),
        }
        if stages["extract_seconds"]:
            record["windows_per_second"] = round(first["T"] / stages["extract_seconds"], 2)
        peaks.append(first.get("peak_gpu_memory_gb"))
    checks = root / "results" / "assumptions" / "jobs" / model
    if checks.is_dir():
        rows = [part["row"] for part in depth_parts(checks)]
        record["kruskal_seconds"] = round(sum(row["kruskal_seconds"] for row in rows), 2)
    peaks = [p for p in peaks if p is not None]
    record["peak_gpu_memory_gb"] = max(peaks) if peaks else None
    extracted = stages["extract_seconds"] is not None
    if extracted and stages["check_seconds"] is not None and checks.is_dir():
        record["status"] = "complete"
    else:
        record["status"] = "extracted" if extracted else "partial"
    return record


def commit(given: str | None) -> str | None:
    """``given``, else the checkout's commit (None outside a git checkout, as on the GPU
    machine, which gets a copy of the working tree: pass ``--commit``)."""
    if given:
        return given
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True
        )
    except OSError:
        return None
    return done.stdout.strip() or None


def device_name() -> str:
    """The GPU's name, or the CPU."""
    import torch

    return torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"


def audit(
    config_path: Path, root: Path, models: list[str] | None = None, given: str | None = None
) -> dict[str, Any]:
    """The JSON record of ``models`` (default: every model of the config) run under ``root``."""
    config = yaml.safe_load(config_path.read_text())
    samples = int(config.get("assumptions", {}).get("samples", 500))
    names = models or [m["name"] for m in config["extract"]["models"]]
    where = {"device": device_name(), "commit": commit(given)}
    shown = config_path.relative_to(ROOT) if config_path.is_relative_to(ROOT) else config_path
    return {
        "config": str(shown),
        "models": {name: model_timings(root, name, samples) | where for name in names},
    }


def merged(record: dict[str, Any], out: Path) -> dict[str, Any]:
    """``record`` with the models of an earlier ``out`` of the same config it does not hold."""
    if not out.is_file():
        return record
    earlier = json.loads(out.read_text())
    if earlier.get("config") != record["config"]:
        return record
    return record | {"models": earlier.get("models", {}) | record["models"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "scale.yaml")
    parser.add_argument("--root", type=Path, default=ROOT, help="where the run's files are")
    parser.add_argument("--run", action="store_true", help="run the workflow first")
    parser.add_argument("--model", action="append", default=[], help="a model to audit")
    parser.add_argument(
        "--stage", choices=["audit", "extract"], default="audit", help="how far to run"
    )
    parser.add_argument("--cores", type=int, default=16)
    parser.add_argument("--target", nargs="*", default=[], help="more Snakemake targets")
    parser.add_argument("--timeout", type=float, help="stop the run after this many seconds")
    parser.add_argument("--commit", help="the commit measured (the GPU copy has no git)")
    parser.add_argument("--print-only", action="store_true", help="print the command, run none")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "gpu" / "scale_audit.json"
    )
    args = parser.parse_args()
    config_path, root = args.config.resolve(), args.root.resolve()
    names = [m["name"] for m in yaml.safe_load(config_path.read_text())["extract"]["models"]]
    unknown = sorted(set(args.model) - set(names))
    if unknown:
        parser.error(f"--model {', '.join(unknown)}: not in {config_path.name} ({names})")
    targets = audit_targets(args.model, args.stage) + args.target
    if args.run and not targets:
        parser.error("--run needs --model (one model a call) or --target")
    command = snakemake_command(root, config_path, args.cores, targets)
    if args.print_only:
        print(" ".join(command))
        return
    run: dict[str, Any] = {}
    if args.run:
        wall, ended = run_workflow(command, args.timeout)
        run = {"snakemake_wall_seconds": wall, "run": ended}
        print(f"snakemake {ended} after {wall} s", flush=True)
    record = audit(config_path, root, args.model or None, args.commit)
    for row in record["models"].values():
        row |= run
    record = merged(record, args.out)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    for name in args.model or names:
        row = record["models"][name]
        sizes = (
            f"{row['params'] / 1e9:.2f} B params, d = {row['d']}, {row['blocks']} blocks, "
            f"T = {row['T']}, n = {row['n']}, S = {row['S']}: "
            if "params" in row
            else ""
        )
        print(
            f"{name} ({row['status']}): {sizes}extract {row['extract_seconds']} s "
            f"({row.get('windows_per_second')} windows/s, context ranks "
            f"{row.get('context_rank_seconds')} s; {row['extract_progress']}), check "
            f"{row['check_seconds']} s ({row['checked_layers']} layers, Kruskal "
            f"{row.get('kruskal_seconds')} s), total {row['total_seconds']} s, peak GPU "
            f"{row['peak_gpu_memory_gb']} GB"
        )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
