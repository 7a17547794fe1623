"""A benchmark's result file: what it compared, its ratio, the two medians, the machine.

Every benchmark that prints ``RATIO`` calls :func:`record` just before, which writes
``benchmarks/results/<benchmark>.json`` (the folder named by ``$MEMCAP_BENCH_RESULTS``
instead, when set: the tests point it at a temporary folder). A run replaces the file of an
earlier one; ``benchmarks/performance_table.py`` renders docs/performance.md's table from
these files. The subfolders of benchmarks/results/ are Snakemake's per-job ``benchmark:``
files, not these.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
from collections.abc import Mapping
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
ENV = "MEMCAP_BENCH_RESULTS"
MEASURED = "measured"


def results_folder(folder: Path | str | None = None) -> Path:
    """``folder``, else ``$MEMCAP_BENCH_RESULTS``, else benchmarks/results/."""
    if folder is not None:
        return Path(folder)
    return Path(os.environ[ENV]) if os.environ.get(ENV) else RESULTS


def machine(gflops: bool = True) -> dict:
    """The facts that scale a timing: CPUs, torch, one-thread matmul GFLOP/s, platform, GPU."""
    import torch

    facts = {
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": _cpu_model(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "matmul_gflops_1thread": None,
    }
    if gflops:  # about a tenth of a second; the thread count is put back
        from _stage import matmul_gflops

        threads = torch.get_num_threads()
        try:
            facts["matmul_gflops_1thread"] = round(matmul_gflops(), 1)
        finally:
            torch.set_num_threads(threads)
    return facts


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _measure(label: str, median: float | None, unit: str) -> dict:
    return {"label": label, "median": None if median is None else float(median), "unit": unit}


def record(
    benchmark: str,
    compares: str,
    ratio: float | None,
    ours: tuple[str, float | None, str],
    baseline: tuple[str, float | None, str],
    *,
    ratio_is: str,
    repeats: int,
    settings: Mapping | argparse.Namespace | None = None,
    other_ratios: Mapping[str, float] | None = None,
    summary: str | None = None,
    extra: Mapping | None = None,
    folder: Path | str | None = None,
    gflops: bool = True,
) -> Path:
    """Write ``<folder>/<benchmark>.json`` and return its path.

    ``benchmark``: the script's name or path (``__file__``; its stem names the file).
    ``compares``: one line, what against what. ``ratio``: the figure printed as ``RATIO``
    (None for a benchmark that compares no speeds); ``ratio_is`` says how it is formed
    (e.g. ``"naive / ours, wall seconds"``). ``ours`` and ``baseline``: (label, value, unit)
    of the two ways, the value a median (or a total where the benchmark times once).
    ``repeats``: how many timings each median is of. ``settings``: the options of the run
    (an argparse Namespace is taken as its dict). ``other_ratios``: more ratios of the same
    run, by name (``{"merged/ours": 1.09}``). ``summary``: one line of what else the run
    found, shown in the table ("ranks identical"). ``extra``: anything else worth keeping
    (JSON-serialisable). ``folder``: where to write (default: see :func:`results_folder`).
    ``gflops=False`` skips timing the matmul. Prints ``result file: <path>``; the caller
    prints its ``RATIO`` line after, so that it stays the last line.
    """
    if isinstance(settings, argparse.Namespace):
        settings = vars(settings)
    name = Path(benchmark).stem
    result = {
        "benchmark": name,
        "compares": compares,
        "ratio": None if ratio is None else float(ratio),
        "ratio_is": ratio_is,
        "other_ratios": {k: float(v) for k, v in (other_ratios or {}).items()},
        "ours": _measure(*ours),
        "baseline": _measure(*baseline),
        "summary": summary,
        "repeats": int(repeats),
        "settings": {k: _plain(v) for k, v in (settings or {}).items()},
        "extra": dict(extra or {}),
        "machine": machine(gflops),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "source": MEASURED,
    }
    out = results_folder(folder)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"result file: {path}")
    return path


def _plain(value: object) -> object:
    """A setting as JSON holds it (paths and other objects as text)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return str(value)
