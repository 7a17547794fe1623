"""A stored default run: every table and record the report reads, so its layout is tested on
a clean clone (tests/report/test_report_browser.py) with tables as wide as the default run's.

``tests/data/default_run/`` holds the report layout (``layout.json``, paths relative to the
run) and the files it names, trimmed where they are long: provenance without the per-example
inputs, failures.csv to the rows a card shows, kruskal_profile.csv to the sizes a verdict reads.
Figures are not stored; ``load`` draws a small placeholder for each. Refresh it after a default
run (``make run``) that changes what the page shows:

    .venv/bin/python tests/helpers/report_fixture.py --refresh
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).resolve().parents[1] / "data" / "default_run"
CAPTIONS = ROOT / "workflow" / "report"

# Tables the report's figures read (tests/report/test_report_figures.py), not its page.
FIGURE_TABLES = ("results/capacity/shared_spread.csv",)
DROPPED = ("example_inputs", "example_tokens_head", "source_images", "forward_error")
STAGES = ("extract", "assumptions", "synthetic", "capacity", "real_memorization", "aot", "report")


def _jobs(run: Path) -> dict[str, list[dict[str, str]]]:
    """The job lists of the run in ``run``, read from its result folders."""
    from memcap.config_schema import validate_schema

    extract = sorted((run / "results" / "extract").glob("*/*/provenance.json"))
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    validate_schema(config, str(ROOT / "workflow" / "schemas" / "config.schema.yaml"))
    order = [m["name"] for m in config["extract"]["models"]]
    layers = [{"model": p.parts[-3], "layer": p.parts[-2]} for p in extract]
    layers.sort(key=lambda j: (order.index(j["model"]), _layer_key(j["layer"])))
    assumptions = run / "results" / "assumptions"
    detail = [
        j
        for j in layers
        if (assumptions / "jobs" / j["model"] / j["layer"] / "kruskal.json").exists()
    ]
    models = [{"model": m} for m in order]
    capacity = [
        j
        for j in detail
        if (run / "results" / "capacity" / j["model"] / f"{j['layer']}.csv").exists()
    ]
    trained = {
        stage: [{"job": p.name.removesuffix("_provenance.json")}
                for p in sorted((run / "results" / stage / "jobs").glob("*_provenance.json"))]
        for stage in ("synthetic", "aot")
    }  # fmt: skip
    return {
        "layers": layers,
        "detail": detail,
        "depth": [m for m in models if (assumptions / m["model"] / "depth.csv").exists()],
        "models": models,
        "onnx_models": [{"model": p.name} for p in sorted((run / "results" / "weights").glob("*"))],
        "capacity_models": [m for m in models if any(j["model"] == m["model"] for j in capacity)],
        "capacity": capacity,
        "real_memorization_models": [
            m for m in models if (run / "results" / "real_memorization" / m["model"]).is_dir()
        ],
        **_coarse_cut_jobs(run, config, models, trained),
    }


def _coarse_cut_jobs(run: Path, config: dict, models: list, trained: dict) -> dict[str, list]:
    """The sweeps, and the check and training jobs of the default config's coarse cuts: one
    per model, one per sweep (paper A), one for paper B's stage ("all", its record naming
    every sweep)."""
    cuts = (config["assumptions"]["cut"], config["synthetic"]["cut"], config["aot"]["cut"])
    if cuts != ("model", "sweep", "stage"):
        raise SystemExit(f"the fixture stores a run in the default cuts, not {cuts}")
    (stage_job,) = trained["aot"]
    record = run / "results" / "aot" / "jobs" / f"{stage_job['job']}_provenance.json"
    return {
        "assumption_jobs": [{"job": m["model"]} for m in models],
        "synthetic": [{"sweep": job["job"]} for job in trained["synthetic"]],
        "synthetic_jobs": trained["synthetic"],
        "aot": [{"sweep": sweep} for sweep in json.loads(record.read_text())["sweeps"]],
        "aot_jobs": trained["aot"],
    }


def _layer_key(layer: str) -> tuple[int, str]:
    return (int(layer), "") if layer.isdigit() else (10**6, layer)


def snapshot(run: Path, fixture: Path = FIXTURE) -> None:
    """Store the report's inputs of the run in ``run`` into ``fixture`` (replacing it)."""
    from memcap.report.cards import SHOWN_FAILURES
    from memcap.report.layout import files_read, report_layout

    enabled = dict.fromkeys(STAGES, True)
    layout = report_layout(_jobs(run), enabled, "CAPTIONS")
    if fixture.exists():
        shutil.rmtree(fixture)
    (fixture / "files").mkdir(parents=True)
    benchmarks = sorted({f for files in layout["benchmarks"].values() for f in files})
    for name in files_read(layout) + benchmarks + list(FIGURE_TABLES):
        source, target = run / name, fixture / "files" / name
        if not source.exists() or source.suffix == ".png" or source.is_dir():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.name == "provenance.json":
            record = json.loads(source.read_text())
            target.write_text(json.dumps({k: v for k, v in record.items() if k not in DROPPED}))
        elif source.name == "failures.csv":
            pd.read_csv(source).head(SHOWN_FAILURES).to_csv(target, index=False)
        elif source.name == "kruskal_profile.csv":
            _decided_sizes(pd.read_csv(source)).to_csv(target, index=False)
        else:
            shutil.copyfile(source, target)
    (fixture / "layout.json").write_text(json.dumps(layout, indent=1))


def _decided_sizes(profile: pd.DataFrame) -> pd.DataFrame:
    """The profile's rows at a few sizes, the last (d) and every power of two."""
    keep = profile["k"].isin([2**i for i in range(12)]) | (profile["k"] == profile["k"].max())
    return profile[keep]


def load(workdir: Path, fixture: Path = FIXTURE) -> Any:
    """The stored run's ReportInputs, its files under ``workdir`` (placeholder figures)."""
    from memcap.config_schema import validate_schema
    from memcap.report import ReportInputs

    layout = json.loads((fixture / "layout.json").read_text())
    shutil.copytree(fixture / "files", workdir, dirs_exist_ok=True)

    def local(path: str) -> str:
        return str(workdir / path)

    for layer in layout["layers"]:
        for name in ("provenance", "kruskal_profile", "failures"):
            if layer.get(name):
                layer[name] = local(layer[name])
    for entry in layout["depth"]:
        entry["table"] = local(entry["table"])
    figures = [f for x in layout["layers"] + layout["depth"] for f in x["figures"]]
    for stage in layout["stages"].values():
        stage["tables"] = {k: local(v) for k, v in stage["tables"].items()}
        stage["records"] = [local(r) for r in stage["records"]]
        figures += stage.get("figures", [])
    for figure in figures:
        figure["path"] = figure["output"] = local(figure["path"])
        figure["caption"] = figure["caption"].replace("CAPTIONS", str(CAPTIONS))
        _placeholder(Path(figure["path"]))
    layout["benchmarks"] = {r: [local(f) for f in fs] for r, fs in layout["benchmarks"].items()}
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    validate_schema(config, str(ROOT / "workflow" / "schemas" / "config.schema.yaml"))
    return ReportInputs.from_layout(
        layout,
        config=config,
        title="memcap · stored default run",
        stages=dict.fromkeys(STAGES, True),
    )


def _placeholder(path: Path) -> None:
    """A small drawing: axes-like dark lines on white (a figure's stand-in)."""
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    pixels = np.full((120, 200), 255, dtype=np.uint8)
    pixels[10:110, 20] = pixels[109, 20:190] = 0
    pixels[np.arange(100) + 10, np.linspace(30, 180, 100).astype(int)] = 60
    Image.fromarray(pixels).save(path)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refresh", action="store_true", help="store this checkout's run")
    parser.add_argument("--run", type=Path, default=ROOT, help="the run's root folder")
    if not parser.parse_args().refresh:
        sys.exit(parser.format_usage())
    snapshot(parser.parse_args().run)
    print(f"stored {sum(1 for _ in FIXTURE.rglob('*') if _.is_file())} files in {FIXTURE}")
