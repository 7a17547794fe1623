"""Assemble the report context from the stages' output files."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from memcap.report import figures, loaders
from memcap.report.context import (
    STAGES,
    Figure,
    LayerSection,
    Limitation,
    ReportContext,
    ScalingSection,
    Table,
)
from memcap.report.render import render_html
from memcap.report.verdicts import MIN_SUBSETS, Verdict, layer_verdicts

_logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReportInputs:
    """Paths of every stage output the report reads, and the run's settings.

    Attributes:
        stage_files: per stage, every output file the stage produced (its final targets).
        benchmarks: Snakemake benchmark files, ``benchmarks/results/<rule>/*.tsv``.
        rule_stages: rule name -> stage name, to sum wall times per stage.
        captions: figure file stem -> {"title": ..., "caption": ...}.
    """

    config: Mapping[str, Any]
    title: str
    stages: Mapping[str, bool]
    stage_files: Mapping[str, Sequence[str]] = field(default_factory=dict)
    benchmarks: Sequence[str] = ()
    rule_stages: Mapping[str, str] = field(default_factory=dict)
    captions: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


def _files(inputs: ReportInputs, stage: str, suffix: str) -> list[Path]:
    return sorted(Path(p) for p in inputs.stage_files.get(stage, ()) if str(p).endswith(suffix))


def _named(paths: Sequence[Path], name: str) -> Path | None:
    return next((p for p in paths if p.name == name), None)


def _figure(path: Path, captions: Mapping[str, Mapping[str, str]]) -> Figure:
    """Embed a stage's PNG with the caption registered for its file stem."""
    entry = captions.get(path.stem, {})
    title = entry.get("title") or path.stem.replace("_", " ").capitalize()
    return Figure(title, entry.get("caption", ""), path.read_bytes(), str(path))


def _model_layer(path: Path, base: str) -> tuple[str, str] | None:
    """(model, layer) of ``<base>/{model}/{layer}/file``, or None for a stage-wide file."""
    parts = path.parts
    for i in range(len(parts) - 1):
        if "/".join(parts[i : i + 2]) == base and len(parts) == i + 5:
            return parts[i + 2], parts[i + 3]
    return None


def _layer_caveats(section: LayerSection, model: loaders.ModelInfo | None) -> list[str]:
    """Caveats of one layer: n > d, undersampling, and the extraction's own warnings."""
    ev = section.verdicts.evidence
    caveats = []
    if ev.n > ev.d:
        caveats.append(
            f"n = {ev.n} > d = {ev.d}: contexts cannot have rank n and n queries cannot be "
            "independent, so Theorem 1 cannot apply at this n."
        )
    if ev.samples < MIN_SUBSETS:
        caveats.append(f"only {ev.samples} random subsets per k (< {MIN_SUBSETS}).")
    if ev.d > ev.T:
        caveats.append(f"T = {ev.T} < d = {ev.d}: general position cannot be tested.")
    if model is not None:
        if model.tokenizer_substitute:
            caveats.append(f"tokenizer substituted: {model.tokenizer_substitute}.")
        caveats.extend(model.warnings)
    return caveats


def _assumption_sections(
    inputs: ReportInputs, models: Mapping[str, loaders.ModelInfo]
) -> tuple[list[LayerSection], list[Figure]]:
    tables = _files(inputs, "assumptions", ".csv")
    summary = loaders.read_table(_named(tables, "summary.csv"))
    if summary is None:
        return [], []
    profiles = {}
    for path in tables:
        key = _model_layer(path, "results/assumptions")
        if key is not None and "profile" in path.stem:
            profiles[key] = pd.read_csv(path)
    capacity = loaders.read_table(_named(_files(inputs, "synthetic", ".csv"), "real.csv"))
    layer_figures: dict[tuple[str, str], list[Figure]] = {}
    stage_figures = []
    for path in _files(inputs, "assumptions", ".png"):
        key = _model_layer(path, "results/assumptions")
        figure = _figure(path, inputs.captions)
        (layer_figures.setdefault(key, []) if key else stage_figures).append(figure)
    sections = []
    for ev in loaders.evidence_from_summary(summary, profiles):
        key = (ev.model, ev.layer)
        section = LayerSection(layer_verdicts(ev), list(layer_figures.get(key, [])))
        if ev.profile and not layer_figures.get(key):
            label = f"{ev.model} · layer {ev.layer}"
            png = figures.profile_plot(ev.profile, ev.n, ev.d, label)
            section.figures.append(
                Figure("P(k) profile", "Drawn by the report.", png, "assumptions profile table")
            )
        if capacity is not None:
            _add_capacity(section, capacity, inputs.captions)
        section.limitations = _layer_caveats(section, models.get(ev.model))
        sections.append(section)
    return sections, stage_figures


def _add_capacity(
    section: LayerSection, capacity: pd.DataFrame, captions: Mapping[str, Mapping[str, str]]
) -> None:
    """Certified capacity of the layer's embeddings vs H, beside Theorem 1's bound."""
    ev = section.verdicts.evidence
    rows = capacity[
        (capacity["model"].astype(str) == ev.model) & (capacity["layer"].astype(str) == ev.layer)
    ]
    if rows.empty:
        return
    rows = rows.sort_values("H")
    theorem = section.verdicts.theorem
    table = pd.DataFrame(
        {
            "H": rows["H"].to_numpy(),
            "certified": rows["certified"].to_numpy(),
            f"H(n−1)+1 (n = {ev.n})": rows["H"].to_numpy() * (ev.n - 1) + 1,
            "Theorem 1 bound here": [theorem.bound(int(h)) for h in rows["H"]],
        }
    )
    section.capacity = Table.from_frame(table)
    entry = captions.get("certified_capacity_real", {})
    section.figures.append(
        Figure(
            entry.get("title", "Certified capacity vs H"),
            entry.get("caption", ""),
            figures.certified_capacity_plot(
                rows, ev.n, theorem.n_applicable, f"{ev.model} · layer {ev.layer}"
            ),
            "results/capacity/real.csv",
        )
    )


def _scaling_section(inputs: ReportInputs, stage: str) -> ScalingSection:
    """A stage's figures, and its fits table when it wrote one."""
    section = ScalingSection(enabled=inputs.stages.get(stage, False))
    section.figures = [_figure(p, inputs.captions) for p in _files(inputs, stage, ".png")]
    for path in _files(inputs, stage, ".csv"):
        if "fit" in path.stem:
            section.fits = Table.from_frame(pd.read_csv(path))
    return section


def _run_limitations(
    inputs: ReportInputs, layers: Sequence[LayerSection], models: Sequence[loaders.ModelInfo]
) -> list[Limitation]:
    limits = [
        Limitation(f"{layer.verdicts.evidence.model} · layer {layer.verdicts.evidence.layer}", text)
        for layer in layers
        for text in layer.limitations
    ]
    checked = {layer.verdicts.evidence.model for layer in layers}
    for model in models:
        if model.name not in checked:
            limits.extend(Limitation(model.name, text) for text in model.warnings)
    for stage, on in inputs.stages.items():
        if not on and stage != "report":
            limits.append(Limitation(stage, "stage switched off in the configuration."))
    return limits


def build_context(inputs: ReportInputs, now: datetime | None = None) -> ReportContext:
    """Read every stage output and decide everything the page shows."""
    provenance = [loaders.read_json(p) for p in _files(inputs, "extract", "provenance.json")]
    models = loaders.models_from_provenance(provenance)
    layers, assumption_figures = _assumption_sections(inputs, {m.name: m for m in models})
    records = {
        stage: [loaders.read_json(p) for p in _files(inputs, stage, ".json")]
        for stage in inputs.stage_files
    }
    undecided = sum(layer.verdicts.theorem.verdict is Verdict.INCONCLUSIVE for layer in layers)
    _logger.info("%d layers checked, %d undecided", len(layers), undecided)
    return ReportContext(
        title=inputs.title,
        generated_utc=(now or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M"),
        stages={stage: bool(inputs.stages.get(stage, False)) for stage in STAGES},
        config_yaml=yaml.safe_dump(dict(inputs.config), sort_keys=False, allow_unicode=True),
        models=models,
        versions=loaders.version_table(records),
        timings=loaders.rule_timings(inputs.benchmarks, inputs.rule_stages),
        layers=layers,
        assumption_figures=assumption_figures,
        paper_a=_scaling_section(inputs, "synthetic"),
        paper_b=_scaling_section(inputs, "aot"),
        limitations=_run_limitations(inputs, layers, models),
    )


def write_report(inputs: ReportInputs, template: str | Path, output: str | Path) -> ReportContext:
    """Build the context, render ``template`` with it and write the page to ``output``."""
    context = build_context(inputs)
    Path(output).write_text(render_html(template, ctx=context), encoding="utf-8")
    return context
