"""The typed context the report template renders: everything the page shows, already decided."""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from memcap.assumptions.verdicts import LayerVerdicts, Outcome
from memcap.report.loaders import ModelInfo, VersionRow
from memcap.report.timings import RuleTiming, RunSpan, StageCost, stage_costs

STAGES = ("extract", "assumptions", "synthetic", "capacity", "aot", "report")


@dataclass(frozen=True)
class Figure:
    """One PNG figure of the page and where it came from."""

    title: str
    caption: str
    png: bytes
    source: str  # the stage output it was embedded from

    @property
    def wide(self) -> bool:
        """Whether the PNG is a multi-panel strip (over twice as wide as tall): give it a row."""
        width, height = struct.unpack(">II", self.png[16:24])  # the IHDR chunk
        return width > 2 * height


@dataclass(frozen=True)
class Table:
    """A small table, already formatted as text."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, digits: int = 3) -> Table:
        """Format a DataFrame: floats to ``digits`` significant digits, NaN as a dash."""
        from memcap.report.render import format_number

        rows = tuple(
            tuple(format_number(_plain(v), digits) for v in record)
            for record in frame.itertuples(index=False)
        )
        return cls(tuple(str(c) for c in frame.columns), rows)


@dataclass(frozen=True)
class Comparison:
    """Paper A's real-data results beside this run's (:mod:`memcap.report.paper_a`).

    Attributes:
        table: one line per kind × layer × weights × model; its last column cites notes.
        notes: the numbered notes (models, data sets, likely reasons, paper A's remarks).
    """

    table: Table
    notes: tuple[str, ...]


def _plain(value: Any) -> Any:
    """numpy scalars as Python scalars, so formatting sees ints and floats."""
    return value.item() if hasattr(value, "item") else value


@dataclass(frozen=True)
class Limitation:
    """A caveat the run itself detected, and the part of the page it affects."""

    where: str
    text: str


@dataclass
class LayerSection:
    """One model × layer: its verdicts, figures, certified capacity and caveats."""

    verdicts: LayerVerdicts
    figures: list[Figure] = field(default_factory=list)
    capacity: Table | None = None
    capacity_saturated: bool = False  # certified = examples used at every H (capped by T)
    limitations: list[str] = field(default_factory=list)
    failures: Table | None = None  # the first failing examples with their mechanisms
    failures_path: str | None = None  # every failing example (the stage's failures.csv)
    failures_count: int = 0

    @property
    def kruskal_room(self) -> str:
        """The Kruskal rank estimate against n: the room left above n, or the shortfall."""
        estimate, n = self.verdicts.evidence.kruskal_rank_estimate, self.verdicts.evidence.n
        if estimate is None:
            return "—"
        if estimate >= n:
            return f"≈ {estimate}: room {estimate - n} above n"
        return f"≈ {estimate}: {n - estimate} short of n"

    @property
    def anchor(self) -> str:
        """An HTML id for the layer's card (model names are free text, so use a slug)."""
        raw = f"{self.verdicts.evidence.model}-{self.verdicts.evidence.layer}"
        return "layer-" + "".join(c if c.isalnum() else "-" for c in raw)


@dataclass
class DepthSection:
    """One model's depth profile: its chart and where Theorem 1 applies along its depth."""

    model: str
    layers: int  # layers audited (detail and depth rows)
    first: str  # first numbered layer where Theorem 1 applies, or "never"
    last: str  # last one, when it stops holding before the deepest layer; else "—"
    gaps: str  # later numbered layers where it does not apply, with the verdict; else "—"
    figures: list[Figure] = field(default_factory=list)


@dataclass(frozen=True)
class StripCell:
    """One layer of a depth strip: Theorem 1's outcome there, and the layer card's anchor."""

    layer: str
    verdict: Outcome
    anchor: str


@dataclass(frozen=True)
class DepthStrip:
    """One model's audited layers in order, each with Theorem 1's verdict."""

    model: str
    cells: tuple[StripCell, ...]
    applies: str  # where Theorem 1 applies, in words: "applies at 1–9, random_attention"


@dataclass
class ScalingSection:
    """One paper's synthetic scaling laws: figures, fitted slopes, notes."""

    enabled: bool
    figures: list[Figure] = field(default_factory=list)
    laws: Table | None = None  # the paper's laws or findings: criteria and what was measured
    verdicts: Table | None = None  # the same laws, compact: outcome, test, statistic, p-value
    fits: Table | None = None
    tables: dict[str, Table] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass
class ReportContext:
    """Everything the template renders."""

    title: str
    generated_utc: str
    stages: Mapping[str, bool]
    config_yaml: str
    models: Sequence[ModelInfo]
    versions: Sequence[VersionRow]
    timings: Sequence[RuleTiming]
    layers: Sequence[LayerSection]
    assumption_figures: Sequence[Figure]
    paper_a: ScalingSection
    paper_b: ScalingSection
    limitations: Sequence[Limitation]
    paper_a_real: Comparison | None = None  # paper A's real-data results beside this run's
    depth: Sequence[DepthSection] = ()  # per model with a depth profile
    strips: Sequence[DepthStrip] = ()  # per model: Theorem 1's verdict at every audited layer
    run: RunSpan | None = None  # when the benchmarked jobs ran
    paper_n: Mapping[str, int] = field(default_factory=dict)  # per model: paper A's n for its kind

    @property
    def stage_costs(self) -> list[StageCost]:
        """Per stage, then over all stages: jobs, CPU time, longest job and peak memory."""
        return stage_costs(self.timings, total="all stages")

    @property
    def verdict_counts(self) -> dict[str, int]:
        """How many layers Theorem 1 applies to, does not, is too close to call or untested at."""
        counts = {o.value: 0 for o in Outcome}
        for layer in self.layers:
            counts[layer.verdicts.theorem.outcome.value] += 1
        return counts

    @property
    def figure_count(self) -> int:
        """Number of figures on the page."""
        return (
            len(self.assumption_figures)
            + sum(len(layer.figures) for layer in self.layers)
            + sum(len(section.figures) for section in self.depth)
            + len(self.paper_a.figures)
            + len(self.paper_b.figures)
        )
