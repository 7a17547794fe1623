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

from memcap.provenance import library_versions
from memcap.report import loaders
from memcap.report.answer import model_answers
from memcap.report.captions import FigureSpec, describe_figure
from memcap.report.cards import add_capacity, add_failures, layer_caveats, layer_notes
from memcap.report.context import (
    STAGES,
    DepthSection,
    Figure,
    LayerSection,
    Limitation,
    RealMemorizationSection,
    ReportContext,
    ScalingSection,
    Table,
)
from memcap.report.depth import (
    depth_strips,
    paper_context_sizes,
    theorem_gaps,
    theorem_span,
)
from memcap.report.paper_a import comparison_table, scale_gaps
from memcap.report.real_memorization import real_memorization_section
from memcap.report.render import render_html
from memcap.report.scaling import scaling_section
from memcap.report.timings import rule_timings, run_span
from memcap.synthetic.setup import setup_sentence, setup_table

_logger = logging.getLogger(__name__)

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
        add_failures(section, failures.get((ev.model, ev.layer)))
        if capacity is not None:
            add_capacity(section, capacity)
        section.limitations = layer_caveats(section, models.get(ev.model))
        section.notes = layer_notes(section)
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


def _scaling_section(inputs: ReportInputs, stage: str) -> ScalingSection:
    """A paper's scaling laws (:mod:`memcap.report.scaling`)."""
    figures = _figures(inputs.stage(stage).figures, inputs.config)
    enabled = inputs.stages.get(stage, False)
    section = scaling_section(stage, enabled, figures, lambda name: inputs.table(stage, name))
    if stage == "synthetic" and enabled and "synthetic" in inputs.config:
        setup = inputs.config["synthetic"]  # the validated section: this run beside paper A
        section.setup = Table.from_frame(setup_table(setup))
        section.setup_note = setup_sentence(setup)
    return section


def _real_memorization(inputs: ReportInputs) -> RealMemorizationSection:
    """Paper A's layer trained on the real embeddings (:mod:`memcap.report.real_memorization`)."""
    stage = "real_memorization"
    figures = _figures(inputs.stage(stage).figures, inputs.config)
    enabled = bool(inputs.stages.get(stage, False))
    return real_memorization_section(enabled, figures, lambda name: inputs.table(stage, name))


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
        gaps = scale_gaps(model)
        if gaps:
            text = f"not paper A's setting: {'; '.join(gaps)}."
            places.setdefault(text, {})[model.name] = list(model.layers)
        if model.name not in checked:
            failed = [] if model.input_audit_passed else [f"input audit: {model.input_audit}."]
            for text in [*failed, *model.warnings]:
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
        limits.extend(Limitation(where, text) for text in section.limitations)
    for stage, on in inputs.stages.items():
        if not on and stage != "report":
            limits.append(Limitation(stage, "stage switched off in the configuration."))
    return limits


def _run_notes(
    models: Sequence[loaders.ModelInfo], scaling: Mapping[str, ScalingSection]
) -> list[Limitation]:
    """What the run checked and passed, and how it trained: the input audits that found no
    duplicates (a failed one is a limitation) and the training recipes."""
    notes = [
        Limitation(m.name, f"input audit: {m.input_audit}.")
        for m in models
        if m.input_audit and m.input_audit_passed
    ]
    for where, section in scaling.items():
        notes.extend(Limitation(where, text) for text in section.recipes)
    return notes


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
    scaling = {"paper A (synthetic)": paper_a, "paper B (aot)": paper_b}
    paper_n = paper_context_sizes(models)
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
        limitations=_run_limitations(inputs, layers, models, scaling),
        run_notes=_run_notes(models, scaling),
        depth=_depth_sections(inputs),
        strips=depth_strips(layers, paper_n),
        paper_n=paper_n,
        answers=model_answers(layers, models),
        real_memorization=_real_memorization(inputs),
        paper_a_real=comparison_table(
            [layer.verdicts.evidence for layer in layers], {m.name: m for m in models}
        ),
    )


def write_report(inputs: ReportInputs, template: str | Path, output: str | Path) -> ReportContext:
    """Build the context, render ``template`` with it and write the page to ``output``."""
    context = build_context(inputs)
    Path(output).write_text(render_html(template, ctx=context), encoding="utf-8")
    return context
