"""Run costs from Snakemake's benchmark files: the run's wall time, CPU time and memory per stage.

Jobs run side by side, so summing their wall times overstates the run's duration (8 jobs on
2 cores read as four times the elapsed time). The page therefore shows CPU time (sum of the
benchmark ``cpu_time``) and peak memory (max of ``max_rss``) per stage, and the run's wall time
as the span of the benchmarked jobs: Snakemake writes a job's benchmark file when the job ends,
so the file's modification time is the job's end and that minus its ``s`` column its start.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd


@dataclass(frozen=True)
class RuleTiming:
    """One rule's jobs, from their benchmark files.

    Attributes:
        wall_s: wall time summed over the jobs (their sum, not the elapsed time).
        longest_s: wall time of the longest job.
        cpu_s: CPU time summed over the jobs; None when no file records it.
        max_rss_mb: the largest resident set size of any job, in MB.
    """

    stage: str
    rule: str
    jobs: int
    wall_s: float
    longest_s: float
    cpu_s: float | None
    max_rss_mb: float | None


@dataclass(frozen=True)
class StageCost:
    """A stage's jobs: how many, their CPU time, the longest one and the peak memory."""

    stage: str
    jobs: int
    cpu_s: float | None
    longest_s: float
    max_rss_mb: float | None


@dataclass(frozen=True)
class RunSpan:
    """When the benchmarked jobs ran.

    Attributes:
        start: the earliest job start (UTC).
        end: the latest job end (UTC).
        busy_s: seconds of the span during which at least one job ran.
    """

    start: datetime
    end: datetime
    busy_s: float

    @property
    def wall_s(self) -> float:
        """Seconds from the first job's start to the last job's end."""
        return (self.end - self.start).total_seconds()


def _column(frame: pd.DataFrame, name: str) -> pd.Series | None:
    """A numeric column, or None when absent or empty (Snakemake writes NA without psutil)."""
    if name not in frame:
        return None
    values = pd.to_numeric(frame[name], errors="coerce")
    return None if values.isna().all() else values


def rule_timings(
    benchmarks: Mapping[str, Iterable[str | Path]], rule_stages: Mapping[str, str]
) -> list[RuleTiming]:
    """Each rule's benchmark files (those that exist), over its jobs."""
    timings = []
    for rule, files in benchmarks.items():
        tables = [pd.read_csv(path, sep="\t") for path in map(Path, files) if path.exists()]
        if not tables:
            continue
        frame = pd.concat(tables, ignore_index=True)
        rss, cpu = _column(frame, "max_rss"), _column(frame, "cpu_time")
        timings.append(
            RuleTiming(
                stage=rule_stages.get(rule, "other"),
                rule=rule,
                jobs=len(tables),
                wall_s=float(frame["s"].sum()),
                longest_s=float(frame["s"].max()),
                cpu_s=None if cpu is None else float(cpu.sum()),
                max_rss_mb=None if rss is None else float(rss.max()),
            )
        )
    return sorted(timings, key=lambda t: (t.stage, t.rule))


def _cost(stage: str, rules: Sequence[RuleTiming]) -> StageCost:
    cpu = [t.cpu_s for t in rules if t.cpu_s is not None]
    rss = [t.max_rss_mb for t in rules if t.max_rss_mb is not None]
    return StageCost(
        stage=stage,
        jobs=sum(t.jobs for t in rules),
        cpu_s=sum(cpu) if cpu else None,
        longest_s=max(t.longest_s for t in rules),
        max_rss_mb=max(rss) if rss else None,
    )


def stage_costs(timings: Sequence[RuleTiming], total: str = "") -> list[StageCost]:
    """Per stage: jobs and CPU time summed over its rules, longest job and peak memory.

    With ``total``, a last row of that name over every stage.
    """
    by_stage: dict[str, list[RuleTiming]] = {}
    for timing in timings:
        by_stage.setdefault(timing.stage, []).append(timing)
    costs = [_cost(stage, rules) for stage, rules in sorted(by_stage.items())]
    return costs + [_cost(total, timings)] if total and timings else costs


def run_span(benchmarks: Mapping[str, Iterable[str | Path]]) -> RunSpan | None:
    """The span of the benchmarked jobs: first start to last end, and how much of it was busy.

    A job's end is its benchmark file's modification time, its start that minus the file's
    wall time ``s``. None when no benchmark file exists.
    """
    intervals = []
    for path in (Path(p) for files in benchmarks.values() for p in files):
        if not path.exists():
            continue
        end = path.stat().st_mtime
        seconds = pd.read_csv(path, sep="\t")["s"]
        intervals += [(end - float(s), end) for s in seconds]
    if not intervals:
        return None
    busy, reach = 0.0, -float("inf")
    for start, end in sorted(intervals):  # the union of the job intervals
        busy += max(0.0, end - max(start, reach))
        reach = max(reach, end)
    return RunSpan(
        start=datetime.fromtimestamp(min(s for s, _ in intervals), UTC),
        end=datetime.fromtimestamp(max(e for _, e in intervals), UTC),
        busy_s=busy,
    )
