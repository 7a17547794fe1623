"""The report's layout from its declarative table (layout.yaml) and the config's jobs.

Each stage's rules list the jobs the config asks for (:data:`JOB_LISTS`, each a list of
wildcard dicts, empty when its stage is off); everything else, which figure, table, provenance
record and benchmark file the page reads, comes from the table. Plain Python and YAML: the
Snakefile imports this module to flag report items and name benchmark files.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import yaml

TABLE_PATH = Path(__file__).with_name("layout.yaml")
Jobs = Mapping[str, Sequence[Mapping[str, str]]]
# The job lists the table may name under `over`.
JOB_LISTS = (
    "layers",
    "detail",
    "depth",
    "models",
    "onnx_models",
    "assumption_jobs",
    "capacity_models",
    "capacity",
    "real_memorization_models",
    "synthetic",
    "synthetic_jobs",
    "aot",
    "aot_jobs",
)


@cache
def layout_table() -> dict[str, Any]:
    """The parsed layout.yaml."""
    return yaml.safe_load(TABLE_PATH.read_text())


def figure_entries(kind: str, jobs: Jobs, caption_dir: str | Path) -> list[dict[str, Any]]:
    """One entry per file of a figure kind: path, output (the file, or the folder written
    whole), caption file, category, labels, wildcards (with ``figure``, see
    :func:`folder_flag`)."""
    entry = layout_table()["figures"][kind]
    name = _figure_name(kind)
    return [
        {
            "path": entry["pattern"].format(**job),
            "output": entry.get("folder", entry["pattern"]).format(**job),
            "caption": str(Path(caption_dir) / entry["caption"]),
            "category": entry["category"],
            "labels": {k: v.format(**job) for k, v in entry["labels"].items()},
            "wildcards": dict(job) | ({"figure": name} if name else {}),
        }
        for job in _selected(entry, jobs)
    ]


def folder_kinds(folder: str) -> list[str]:
    """The figure kinds written into the output folder ``folder`` (a pattern), in table order."""
    figures = layout_table()["figures"].items()
    return [kind for kind, entry in figures if entry.get("folder") == folder]


def folder_flag(folder: str) -> dict[str, Any]:
    """What Snakemake's report() flag of an output folder needs: its figures' patterns relative
    to it, and the caption, category and subcategory its kinds share.

    Where the folder holds several kinds, each pattern's file name becomes the ``figure``
    wildcard, constrained to that name, so that one caption tells the kinds apart.
    """
    table = layout_table()["figures"]
    kinds = folder_kinds(folder)
    shared = {key: {table[kind][key] for kind in kinds} for key in _SHARED}
    if not kinds or any(len(values) != 1 for values in shared.values()):
        raise ValueError(f"the figure kinds in {folder} need one {', '.join(_SHARED)}: {shared}")
    patterns = []
    for kind in kinds:
        relative = Path(table[kind]["pattern"]).relative_to(folder)
        name = _figure_name(kind)
        if name:
            relative = relative.with_name(f"{{figure,{name}}}{relative.suffix}")
        patterns.append(relative.as_posix())
    return {"patterns": patterns} | {key: values.pop() for key, values in shared.items()}


def figure_labels(folder: str, wildcards: Mapping[str, str]) -> dict[str, str]:
    """The report labels of the file in ``folder`` with ``wildcards`` (its job's and its
    pattern's): those of its kind, told by ``figure`` where the folder holds several."""
    figure = wildcards.get("figure")
    kind = next(k for k in folder_kinds(folder) if _figure_name(k) in (None, figure))
    labels = layout_table()["figures"][kind]["labels"]
    return {key: value.format(**wildcards) for key, value in labels.items()}


# What the figure kinds written into one folder share: one report() flag carries them.
_SHARED = ("caption", "category", "subcategory")


def _figure_name(kind: str) -> str | None:
    """The ``figure`` wildcard of a kind that shares its folder with others: its file's stem."""
    folder = layout_table()["figures"][kind].get("folder")
    if folder is None or len(folder_kinds(folder)) == 1:
        return None
    return Path(layout_table()["figures"][kind]["pattern"]).stem


def benchmark_files(jobs: Jobs) -> dict[str, list[str]]:
    """Benchmark file of every compute job the config asks for, by rule (``once``: one job
    for the whole list)."""
    return {
        rule: [entry["pattern"].format(**job) for job in _selected(entry, jobs)]
        for rule, entry in layout_table()["benchmarks"].items()
    }


def _selected(entry: Mapping[str, Any], jobs: Jobs) -> list[Mapping[str, str]]:
    """The jobs of a layout entry: one per item of its ``over`` list, or a single one
    (``once``) while that list is not empty."""
    selected = list(jobs[entry["over"]])
    return ([{}] if selected else []) if entry.get("once") else selected


def report_layout(
    jobs: Jobs, enabled: Mapping[str, bool], caption_dir: str | Path
) -> dict[str, Any]:
    """Every file the page reads, by name (JSON-able): per layer, per depth model, per stage,
    and the benchmark files with each rule's stage."""
    table = layout_table()
    audited = {(job["model"], job["layer"]) for job in jobs["detail"]}
    layer_figures = _figures(table["layer"]["figures"], jobs, caption_dir)
    layers = [
        {
            "model": job["model"],
            "layer": job["layer"],
            "provenance": table["stages"]["extract"]["records"]["pattern"].format(**job),
            **{
                name: table["layer"][name].format(**job)
                if (job["model"], job["layer"]) in audited
                else None
                for name in ("kruskal_profile", "failures")
            },
            "figures": _of_job(layer_figures, job),
        }
        for job in jobs["layers"]
    ]
    depth_figures = _figures(table["depth"]["figures"], jobs, caption_dir)
    depth = [
        {
            "model": job["model"],
            "table": table["depth"]["table"].format(**job),
            "figures": _of_job(depth_figures, job),
        }
        for job in jobs["depth"]
    ]
    stages: dict[str, dict[str, Any]] = {}
    for stage, entry in table["stages"].items():
        records = entry.get("records")
        stages[stage] = {
            "tables": dict(entry.get("tables", {})) if enabled[stage] else {},
            "records": [records["pattern"].format(**job) for job in jobs[records["over"]]]
            if records
            else [],
        }
    for kind, entry in table["figures"].items():
        if entry["stage"] != "assumptions":
            stages[entry["stage"]].setdefault("figures", []).extend(
                figure_entries(kind, jobs, caption_dir)
            )
    return {
        "layers": layers,
        "depth": depth,
        "stages": stages,
        "benchmarks": benchmark_files(jobs),
        "rule_stages": {rule: e["stage"] for rule, e in table["benchmarks"].items()},
    }


def _of_job(figures: Sequence[dict[str, Any]], job: Mapping[str, str]) -> list[dict[str, Any]]:
    """The figures written for ``job`` (their wildcards agree with its own)."""
    return [f for f in figures if all(f["wildcards"].get(k) == v for k, v in job.items())]


def _figures(kinds: Sequence[str], jobs: Jobs, caption_dir: str | Path) -> list[dict[str, Any]]:
    """The entries of every figure of ``kinds``, kind by kind."""
    return [figure for kind in kinds for figure in figure_entries(kind, jobs, caption_dir)]


def unlisted(files: Iterable[str], inputs: Iterable[str]) -> list[str]:
    """The ``files`` that are neither among ``inputs`` nor inside a folder among them."""
    listed = [Path(path) for path in inputs]
    return [f for f in files if not any(p == Path(f) or p in Path(f).parents for p in listed)]


def files_read(layout: Mapping[str, Any]) -> list[str]:
    """The stage outputs a layout names (tables, figures, records), each once, in order."""
    files: list[str] = []
    for layer in layout["layers"]:
        files.append(layer["provenance"])
        files += [layer[name] for name in ("kruskal_profile", "failures") if layer.get(name)]
        files += [figure["output"] for figure in layer["figures"]]
    for model in layout["depth"]:
        files += [model["table"]] + [figure["output"] for figure in model["figures"]]
    for stage in layout["stages"].values():
        files += list(stage.get("tables", {}).values()) + stage.get("records", [])
        files += [figure["output"] for figure in stage.get("figures", [])]
    return list(dict.fromkeys(files))
