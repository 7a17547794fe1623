"""The jobs of a dry run (``snakemake -n --profile profiles/slurm``), their requests by rule,
and a plan on paper: longest-job-first schedules on G devices.

No torch import.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class DryJob:
    """One job of a dry run: its rule, wildcards and resources as Snakemake printed them, and
    whether it is a member of a group job (submitted with the group's other members)."""

    rule: str
    wildcards: dict[str, str]
    resources: dict[str, str]
    grouped: bool = False

    @property
    def gpus(self) -> int:
        return int(self.resources.get("gpu", 0))


def parse_dry_run(text: str) -> list[DryJob]:
    """Every job block (``rule <name>:`` and its indented fields) of a dry run's output; a
    group job's members are listed indented under its ``Group job report``."""
    jobs = []
    pattern = r"^( *)(?:local)?rule (\w+):\n((?:\1    .*\n)+)"
    for block in re.finditer(pattern, text, re.MULTILINE):
        fields = dict(re.findall(r"^ *    (\w+): (.*)$", block.group(3), re.MULTILINE))
        wildcards = dict(re.findall(r"(\w+)=([^,]+)", fields.get("wildcards", "")))
        resources = dict(re.findall(r"(\w+)=([^,]+)", fields.get("resources", "")))
        jobs.append(DryJob(block.group(2), wildcards, resources, grouped=bool(block.group(1))))
    return jobs


def local_rules(smk_texts: Iterable[str]) -> set[str]:
    """Rules a workflow's ``localrules:`` declarations name."""
    names: set[str] = set()
    for text in smk_texts:
        for block in re.finditer(r"^localrules:\n((?:    \w+,?\n)+)", text, re.MULTILINE):
            names |= set(re.findall(r"\w+", block.group(1)))
    return names


def request_rows(
    jobs: Sequence[DryJob], threads: Mapping[str, int], local: set[str]
) -> list[dict[str, str]]:
    """One row per rule of the batch jobs (``local`` rules and ``all`` left out): its job
    count, GPUs, CPUs (``threads``: the profile's set-threads) and the range of its runtime
    and mem_mb requests (a group member's: Snakemake combines its group's into one); GPU
    rules first, each kind by name (a dry run's order varies)."""
    by_rule: dict[str, list[DryJob]] = {}
    for job in jobs:
        if job.rule not in local and job.rule != "all":
            by_rule.setdefault(job.rule, []).append(job)
    return [
        {
            "rule": f"{rule} (in a group job)" if group[0].grouped else rule,
            "jobs": str(len(group)),
            "GPU": str(group[0].gpus or "–"),
            "CPUs": str(threads.get(rule, 1)),
            "runtime (min)": _span(int(j.resources["runtime"]) for j in group),
            "mem_mb": _span(int(j.resources["mem_mb"]) for j in group),
        }
        for rule, group in sorted(by_rule.items(), key=lambda item: (-item[1][0].gpus, item[0]))
    ]


def _span(values: Iterable[int]) -> str:
    ordered = sorted(values)
    low, high = ordered[0], ordered[-1]
    return f"{low:,}" if low == high else f"{low:,} – {high:,}"


def markdown(rows: Sequence[Mapping[str, str]]) -> str:
    """``rows`` as a Markdown table."""
    header = list(rows[0])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row[key] for key in header) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def longest_first(seconds: Sequence[float], devices: int) -> float:
    """Wall time of ``seconds`` (independent jobs of one device each) on ``devices`` devices,
    each job started, longest first, on the device that frees first (Graham's LPT rule,
    within 4/3 of the optimum)."""
    free = [0.0] * devices
    for length in sorted(seconds, reverse=True):
        heapq.heappush(free, heapq.heappop(free) + length)
    return max(free)
