"""The typed context the report template renders: everything the page shows, already decided."""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from memcap.assumptions.verdicts import LayerVerdicts, Outcome
from memcap.report.loaders import ModelInfo, VersionRow, layer_order
from memcap.report.timings import RuleTiming, RunSpan, StageCost, stage_costs

STAGES = (
    "extract", "assumptions", "synthetic", "capacity", "real_memorization", "aot", "report",
)  # fmt: skip


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
    unresolved_ranks: tuple[int, int] = (0, 0)  # shared-context ranks not one number, of all
    limitations: list[str] = field(default_factory=list)  # what limits the layer's reading
    notes: list[str] = field(default_factory=list)  # structure found in its queries
    failures: Table | None = None  # the first failing examples with their mechanisms
    failures_path: str | None = None  # every failing example (the stage's failures.csv)
    failures_count: int = 0

    @property
    def kruskal_room(self) -> str:
        """The Kruskal rank against n on the verdict's scale: the sampled k whose every sampled
        k-subset is a decade clear of the measured error, and the room it leaves above n (a
        sampled estimate, not a bound), or the exact bound that puts it below n."""
        ev = self.verdicts.evidence
        clear, n, proved = ev.error_estimate_clear, ev.n, ev.certified_upper
        if proved is not None and proved < n:
            return f"≤ {proved} (proved): {n - proved} short of n"
        if clear is None:
            return "—"
        if clear >= n:
            return (
                f"{clear} sampled, a decade clear: {clear - n} above n (an estimate, not a bound)"
            )
        return f"{clear} sampled, a decade clear: below n = {n}, no room shown (not a shortfall)"

    @property
    def tau_estimate(self) -> str:
        """τ's Kruskal rank estimate (largest k with P(k) = 1 at τ), labelled as τ's."""
        estimate = self.verdicts.evidence.kruskal_rank_estimate
        return "—" if estimate is None else f"≈ {estimate} at τ"

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
    """One paper's synthetic scaling laws: figures, fitted slopes, notes.

    ``notes`` read the results (laws not reproduced, what the bound means), ``limitations``
    limit what they show (censored, under-trained or optimiser-limited seeds, inconclusive
    laws) and ``recipes`` say how the seeds were trained (the run summary lists them).
    """

    enabled: bool
    figures: list[Figure] = field(default_factory=list)
    setup: Table | None = None  # this run's settings beside the paper's
    setup_note: str = ""  # what the difference in setup means for the laws
    laws: Table | None = None  # the paper's laws or findings: criteria and what was measured
    verdicts: Table | None = None  # the same laws, compact: outcome, test, statistic, p-value
    fits: Table | None = None
    tables: dict[str, Table] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    limitations: list[str] = field(default_factory=list)
    recipes: list[str] = field(default_factory=list)
    underpowered: list[str] = field(default_factory=list)  # laws under 80% power, for the top


@dataclass
class RealMemorizationSection:
    """Paper A's layer trained on the real embeddings (:mod:`memcap.report.real_memorization`):
    figures, each input's estimates side by side, linear in H, real against the controls, and
    per model the words "achieved" reads on the first screen."""

    enabled: bool
    figures: Sequence[Figure] = ()
    estimates: Table | None = None
    laws: Table | None = None
    paired: Table | None = None
    achieved: Mapping[str, str] = field(default_factory=dict)
    controls: str = ""  # the i.i.d. controls this run trained, in words


@dataclass(frozen=True)
class ModelAnswer:
    """One model's answer on the first screen (:mod:`memcap.report.answer`).

    Attributes:
        model: its name.
        granted: the number of examples min(T, H(n−1)+1), or the construction's
            min(T, H(d_h−1)+1) at the model's own d_h < n ("—" where Theorem 1 applies nowhere
            or H is unknown).
        grants: how it is computed, in words, with its caveats.
        rests_on: what the bound rests on, one phrase each.
    """

    model: str
    granted: str
    grants: str
    rests_on: tuple[str, ...]


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
    answers: Sequence[ModelAnswer] = ()  # per model: where Theorem 1 applies, what it grants
    run_notes: Sequence[Limitation] = ()  # audits that passed, training recipes
    real_memorization: RealMemorizationSection = field(
        default_factory=lambda: RealMemorizationSection(False)
    )  # paper A's layer trained on the real embeddings

    def answer(self, model: str) -> ModelAnswer | None:
        """The first screen's answer for ``model``."""
        return next((a for a in self.answers if a.model == model), None)

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
            + len(self.real_memorization.figures)
        )


def layers_by_model(layers: Sequence[LayerSection]) -> dict[str, list[LayerSection]]:
    """The layer sections of each model, models in page order, layers in depth order."""
    by_model: dict[str, list[LayerSection]] = {}
    for section in layers:
        by_model.setdefault(section.verdicts.evidence.model, []).append(section)
    return {
        model: sorted(sections, key=lambda s: layer_order(s.verdicts.evidence.layer))
        for model, sections in by_model.items()
    }
