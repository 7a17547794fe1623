"""Result files for docs/performance.md's table from the device's raw outputs.

The GPU measurements write their raw JSON on the device (``benchmarks/gpu/paper_a_grid.json``
from ``paper_a_grid.py``, ``benchmarks/gpu/scale_audit.json`` from ``gpu_scale_audit.py``);
once fetched and committed, this script turns each into a result file of
``benchmarks/results/`` (no ratio: they time our way only), with the device, the commit
measured and the headline figures, so the generated table carries them:

    .venv/bin/python benchmarks/gpu_results.py
    .venv/bin/python benchmarks/performance_table.py
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from _results import RESULTS, record

GPU = Path(__file__).resolve().parent / "gpu"


def _source(raw: Path) -> str:
    return f"raw device output {raw.relative_to(GPU.parents[1])}, converted by gpu_results.py"


def grid_result(raw: Path, folder: Path | None = None) -> Path:
    """paper_a_grid.json's extrapolated GPU-hours of the whole grid, per sweep beside."""
    grid = json.loads(raw.read_text())
    per_sweep = ", ".join(
        f"{name} {sweep['grid_seconds']:,.0f} s ({sweep['replicas']} replicas, "
        f"{sweep['fraction_of_peak']:.1%} of peak)"
        for name, sweep in grid["sweeps"].items()
    )
    path = record(
        "paper_a_grid",
        f"paper A's {grid['config']} grid on a GPU ({grid['precision']}, CUDA graphs "
        f"{'on' if grid['cuda_graph'] else 'off'}, group_by {grid['group_by']}, max_padding "
        f"{grid['max_padding']:g}; no comparison)",
        None,
        ("whole grid, extrapolated", round(grid["grid_hours"], 2), "GPU-hours"),
        ("", None, ""),
        ratio_is="no ratio: GPU-hours of the grid",
        repeats=1,
        settings={"commit": grid["commit"], "torch": grid["torch"]},
        summary=f"{per_sweep}; extrapolated from the measured steps, an upper bound",
        folder=folder,
        gflops=False,
    )
    return _stamp(path, raw, grid["device"])


def audit_result(raw: Path, folder: Path | None = None) -> Path:
    """scale_audit.json's extraction of every block, per model."""
    audit = json.loads(raw.read_text())["models"]
    parts = [
        f"{name}: {m['total_seconds']} s ({m['status']}, d = {m['d']}, {m['blocks']} blocks, "
        f"T = {m['T']}, {m['windows_per_second']} windows/s, {m['peak_gpu_memory_gb']} GB)"
        for name, m in audit.items()
    ]
    first = next(iter(audit.values()))
    path = record(
        "gpu_scale_audit",
        "configs/scale.yaml through Snakemake on a GPU, every block (no comparison)",
        None,
        ("slowest model", max(m["total_seconds"] for m in audit.values()), "s wall"),
        ("", None, ""),
        ratio_is="no ratio: seconds per model",
        repeats=1,
        settings={"commit": first["commit"], "config": "configs/scale.yaml"},
        summary="; ".join(parts),
        folder=folder,
        gflops=False,
    )
    return _stamp(path, raw, first["device"])


def _stamp(path: Path, raw: Path, device: str) -> Path:
    """The device that measured, and where the raw figures are, in place of this machine."""
    result = json.loads(path.read_text())
    result["machine"] = {"gpu": device}
    result["date"] = None
    result["source"] = _source(raw)
    path.write_text(json.dumps(result, indent=2) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", type=Path, default=GPU / "paper_a_grid.json")
    parser.add_argument("--audit", type=Path, default=GPU / "scale_audit.json")
    parser.add_argument("--folder", type=Path, default=RESULTS, help="where to write")
    args = parser.parse_args(argv)
    grid_result(args.grid.resolve(), args.folder)
    audit_result(args.audit.resolve(), args.folder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
