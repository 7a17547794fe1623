"""Assemble the report context from the stages' output files."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from memcap.assumptions.verdicts import MIN_SUBSETS
from memcap.capacity.ceiling import ceiling_reading
from memcap.provenance import library_versions
from memcap.report import loaders
from memcap.report.captions import FigureSpec, describe_figure
from memcap.report.context import (
    STAGES,
    DepthSection,
    Figure,
    LayerSection,
    Limitation,
    ReportContext,
    ScalingSection,
    Table,
)
from memcap.report.depth import depth_strips, theorem_gaps, theorem_span
from memcap.report.paper_a import comparison_table
from memcap.report.render import render_html
from memcap.report.scaling import scaling_section
from memcap.report.timings import rule_timings, run_span

_logger = logging.getLogger(__name__)
SHOWN_FAILURES = 8  # failing examples listed in a layer's card

# Libraries the report itself renders with, recorded beside the stages' versions.
REPORT_PACKAGES = ("memcap", "jinja2", "matplotlib", "seaborn", "pandas", "snakemake")


@dataclass(frozen=True)
class LayerFiles:
    """The files of one model × layer: extraction provenance, P(k) table, figures."""

    model: str
    layer: str
    provenance: str
    kruskal_profile: str | None = None
    failures: str | None = None
    figures: Sequence[FigureSpec] = ()


@dataclass(frozen=True)
class DepthFiles:
    """The depth profile of one model: its table (depth.csv) and chart."""

    model: str
    table: str
    figures: Sequence[FigureSpec] = ()


@dataclass(frozen=True)
class StageFiles:
    """A stage's named tables (e.g. ``fits``), its figures and its provenance records."""

    tables: Mapping[str, str] = field(default_factory=dict)
    figures: Sequence[FigureSpec] = ()
    records: Sequence[str] = ()


@dataclass(frozen=True)
class ReportInputs:
    """Every stage output the report reads, by name, and the run's settings.

    Attributes:
        layers: per extracted model × layer, its files.
        depth: per model with a depth profile, its files.
        stage_files: per stage, its named tables, figures and provenance records.
        benchmarks: rule -> its jobs' Snakemake benchmark files.
        rule_stages: rule name -> stage name, to total CPU time and memory per stage.
    """

    config: Mapping[str, Any]
    title: str
    stages: Mapping[str, bool]
    layers: Sequence[LayerFiles] = ()
    depth: Sequence[DepthFiles] = ()
    stage_files: Mapping[str, StageFiles] = field(default_factory=dict)
    benchmarks: Mapping[str, Sequence[str]] = field(default_factory=dict)
    rule_stages: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_layout(cls, layout: Mapping[str, Any], **settings: Any) -> ReportInputs:
        """Build from the workflow's report layout (``report_layout`` in rules/common.smk)."""
        layers = [
            LayerFiles(
                model=str(layer["model"]),
                layer=str(layer["layer"]),
                provenance=layer["provenance"],
                kruskal_profile=layer.get("kruskal_profile"),
                failures=layer.get("failures"),
                figures=[FigureSpec.from_dict(f) for f in layer.get("figures", ())],
            )
            for layer in layout.get("layers", ())
        ]
        depth = [
            DepthFiles(
                model=str(entry["model"]),
                table=entry["table"],
                figures=[FigureSpec.from_dict(f) for f in entry.get("figures", ())],
            )
            for entry in layout.get("depth", ())
        ]
        stage_files = {
            stage: StageFiles(
                tables=dict(files.get("tables") or {}),
                figures=[FigureSpec.from_dict(f) for f in files.get("figures", ())],
                records=list(files.get("records") or ()),
            )
            for stage, files in layout.get("stages", {}).items()
        }
        return cls(
            layers=layers,
            depth=depth,
            stage_files=stage_files,
            benchmarks={rule: list(files) for rule, files in layout.get("benchmarks", {}).items()},
            rule_stages=dict(layout.get("rule_stages") or {}),
            **settings,
        )

    def stage(self, name: str) -> StageFiles:
        """The files of stage ``name`` (none when the stage is off)."""
        return self.stage_files.get(name, StageFiles())

    def table(self, stage: str, name: str) -> Path | None:
        """The stage's table ``name`` when it exists."""
        path = self.stage(stage).tables.get(name)
        return Path(path) if path and Path(path).exists() else None


def _figures(specs: Sequence[FigureSpec], config: Mapping[str, Any]) -> list[Figure]:
    """Embed the stage's PNGs that exist, with the titles and captions their report items carry."""
    figures = []
    for spec in specs:
        path = Path(spec.path)
        if path.exists():
            title, caption = describe_figure(spec, config)
            figures.append(Figure(title, caption, path.read_bytes(), path.as_posix()))
    return figures


def _layer_caveats(section: LayerSection, model: loaders.ModelInfo | None) -> list[str]:
    """Caveats of one layer: n > d, undersampling, saturated capacity, extraction warnings."""
    ev = section.verdicts.evidence
    caveats = []
    if ev.n > ev.d:
        caveats.append(
            f"n = {ev.n} > d = {ev.d}: contexts cannot have rank n and n queries cannot be "
            "independent, so Theorem 1 cannot apply at this n."
        )
    if ev.duplicate_pairs and ev.duplicate_pairs == ev.T * (ev.T - 1) // 2:
        caveats.append(
            f"all {ev.T} query vectors are identical: at this layer the query token does not "
            "depend on the input (e.g. a [CLS] or first-position embedding before any "
            "attention), so no two queries are independent."
        )
    elif ev.duplicate_pairs:
        caveats.append(
            f"{ev.duplicate_pairs} pairs of identical query vectors (repeated inputs or tokens)."
        )
    if ev.samples < MIN_SUBSETS:
        caveats.append(f"only {ev.samples} random subsets per k (< {MIN_SUBSETS}).")
    if ev.d > ev.T:
        caveats.append(f"T = {ev.T} < d = {ev.d}: general position cannot be tested.")
    if section.capacity_saturated:
        caveats.append(
            "the certified capacity equals the number of examples it was computed on at every "
            "H: it is capped by T, not by the layer (raise T or capacity.max_T to see it "
            "grow with H)."
        )
    if model is not None:
        if model.input_audit:
            caveats.append(f"input audit: {model.input_audit}.")
        caveats.extend(model.warnings)
        substitute = model.tokenizer_substitute
        if substitute and not any(substitute in warning for warning in model.warnings):
            caveats.append(f"tokenizer substitute: {substitute}.")
    return caveats


def _assumption_sections(
    inputs: ReportInputs, models: Mapping[str, loaders.ModelInfo]
) -> tuple[list[LayerSection], list[Figure]]:
    """One card per model × layer, and the stage-wide figures beside them.

    The capacity stage's certified capacity of the same embeddings sits beside the assumption
    checks, which decide whether Theorem 1's bound applies to them.
    """
    overview = _figures(inputs.stage("capacity").figures, inputs.config)
    summary = loaders.read_table(inputs.table("assumptions", "summary"))
    if summary is None:
        return [], overview
    profiles, layer_figures = {}, {}
    for layer in inputs.layers:
        key = (layer.model, layer.layer)
        if layer.kruskal_profile and Path(layer.kruskal_profile).exists():
            profiles[key] = pd.read_csv(layer.kruskal_profile)
        layer_figures[key] = _figures(layer.figures, inputs.config)
    capacity = loaders.read_table(inputs.table("capacity", "real"))
    failures = {(layer.model, layer.layer): layer.failures for layer in inputs.layers}
    sections = []
    for verdicts in loaders.verdicts_from_summary(summary, profiles):
        ev = verdicts.evidence
        section = LayerSection(verdicts, layer_figures.get((ev.model, ev.layer), []))
        _add_failures(section, failures.get((ev.model, ev.layer)))
        if capacity is not None:
            _add_capacity(section, capacity)
        section.limitations = _layer_caveats(section, models.get(ev.model))
        sections.append(section)
    return sections, overview


def _depth_sections(inputs: ReportInputs) -> list[DepthSection]:
    """Per model with a depth table: its chart, and where along depth Theorem 1 applies."""
    sections = []
    for files in inputs.depth:
        table = loaders.read_table(files.table)
        if table is None:
            continue
        first, last = theorem_span(table)
        figures = _figures(files.figures, inputs.config)
        gaps = theorem_gaps(table)
        sections.append(DepthSection(files.model, len(table), first, last, gaps, figures))
    return sections


def _add_failures(section: LayerSection, path: str | None) -> None:
    """The layer's first failing examples (input, check, mechanism) from the stage's table."""
    table = loaders.read_table(path)
    if table is None or table.empty:
        return
    section.failures_path = path
    section.failures_count = len(table)
    shown = table.head(SHOWN_FAILURES)[
        ["example", "input", "check", "outcome", "mechanism", "detail"]
    ]
    section.failures = Table.from_frame(shown.fillna(""))


def _add_capacity(section: LayerSection, capacity: pd.DataFrame) -> None:
    """The layer's certified capacity per H beside H(n−1)+1 and the bound the verdicts allow.

    Where the examples used are known, each row also says whether it measures the embeddings
    or sits at its ceiling min(T, H·d), which bounds the rank whatever the embeddings.
    """
    ev = section.verdicts.evidence
    rows = capacity[
        (capacity["model"].astype(str) == ev.model) & (capacity["layer"].astype(str) == ev.layer)
    ].sort_values("H")
    if rows.empty:
        return
    heads = rows["H"].to_numpy()
    table = pd.DataFrame({"H": heads, "certified": rows["certified"].to_numpy()})
    if "T" in rows:
        table["examples used"] = rows["T"].to_numpy()
        section.capacity_saturated = bool((rows["certified"] >= rows["T"]).all())
    table[f"H(n−1)+1, n = {ev.n}"] = heads * (ev.n - 1) + 1
    table["bound Theorem 1 grants here"] = [section.verdicts.theorem.bound(int(h)) for h in heads]
    if "T" in rows:
        sizes = zip(rows["certified"], rows["T"], heads, strict=True)
        table["reading"] = [ceiling_reading(int(c), int(t), int(h), ev.d) for c, t, h in sizes]
    section.capacity = Table.from_frame(table)


def _scaling_section(inputs: ReportInputs, stage: str) -> ScalingSection:
    """A paper's scaling laws (:mod:`memcap.report.scaling`)."""
    figures = _figures(inputs.stage(stage).figures, inputs.config)
    enabled = inputs.stages.get(stage, False)
    return scaling_section(stage, enabled, figures, lambda name: inputs.table(stage, name))


def _run_limitations(
    inputs: ReportInputs,
    layers: Sequence[LayerSection],
    models: Sequence[loaders.ModelInfo],
    scaling: Mapping[str, ScalingSection],
) -> list[Limitation]:
    """Every caveat of the page once, with every model and layer it applies to."""
    places: dict[str, dict[str, list[str]]] = {}
    for layer in layers:
        ev = layer.verdicts.evidence
        for text in layer.limitations:
            places.setdefault(text, {}).setdefault(ev.model, []).append(ev.layer)
    checked = {layer.verdicts.evidence.model for layer in layers}
    for model in models:
        if model.name not in checked:
            for text in model.warnings:
                places.setdefault(text, {})[model.name] = list(model.layers)
    limits = [
        Limitation(
            "; ".join(
                f"{m} · layer{'s' if len(ls) > 1 else ''} {', '.join(ls)}"
                for m, ls in where.items()
            ),
            text,
        )
        for text, where in places.items()
    ]
    for where, section in scaling.items():
        limits.extend(Limitation(where, note) for note in section.notes)
    for stage, on in inputs.stages.items():
        if not on and stage != "report":
            limits.append(Limitation(stage, "stage switched off in the configuration."))
    return limits


def build_context(inputs: ReportInputs, now: datetime | None = None) -> ReportContext:
    """Read every stage output and decide everything the page shows."""
    provenance = [
        loaders.read_json(layer.provenance)
        for layer in inputs.layers
        if Path(layer.provenance).exists()
    ]
    models = loaders.models_from_provenance(provenance)
    layers, assumption_figures = _assumption_sections(inputs, {m.name: m for m in models})
    records = {
        stage: [loaders.read_json(p) for p in files.records if Path(p).exists()]
        for stage, files in inputs.stage_files.items()
    }
    records["report"] = [{"versions": library_versions(REPORT_PACKAGES)}]
    paper_a = _scaling_section(inputs, "synthetic")
    paper_b = _scaling_section(inputs, "aot")
    outcomes = Counter(layer.verdicts.theorem.outcome.value for layer in layers)
    _logger.info("%d model x layer checks, Theorem 1: %s", len(layers), dict(outcomes))
    return ReportContext(
        title=inputs.title,
        generated_utc=(now or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M"),
        stages={stage: bool(inputs.stages.get(stage, False)) for stage in STAGES},
        config_yaml=yaml.safe_dump(dict(inputs.config), sort_keys=False, allow_unicode=True),
        models=models,
        versions=loaders.version_table(records),
        timings=rule_timings(inputs.benchmarks, inputs.rule_stages),
        run=run_span(inputs.benchmarks),
        layers=layers,
        assumption_figures=assumption_figures,
        paper_a=paper_a,
        paper_b=paper_b,
        limitations=_run_limitations(
            inputs, layers, models, {"paper A (synthetic)": paper_a, "paper B (aot)": paper_b}
        ),
        depth=_depth_sections(inputs),
        strips=depth_strips(layers),
        paper_a_real=comparison_table(
            [layer.verdicts.evidence for layer in layers], {m.name: m for m in models}
        ),
    )


def write_report(inputs: ReportInputs, template: str | Path, output: str | Path) -> ReportContext:
    """Build the context, render ``template`` with it and write the page to ``output``."""
    context = build_context(inputs)
    Path(output).write_text(render_html(template, ctx=context), encoding="utf-8")
    return context
