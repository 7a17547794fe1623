"""Read the stage outputs the report needs: provenance records and tables."""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from memcap.assumptions.evidence import evidence_from_row
from memcap.assumptions.verdicts import LayerVerdicts, verdicts_from_columns
from memcap.extract.audit import audit_passed, audit_verdict

_logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelInfo:
    """One extracted model, merged over its layers' provenance records."""

    name: str
    family: str
    model_id: str
    weights_source: str  # random / pretrained / local
    checksum: str
    data_source: str
    T: int
    n: int
    d: int
    layers: tuple[str, ...]
    tokenizer_substitute: str | None = None
    warnings: tuple[str, ...] = ()
    description: str | None = None  # what the model is (config `description`)
    stands_in_for: str | None = None  # the paper-A model it replaces offline
    weights_origin: str | None = None  # package, version, file checksum; precision
    input_audit: str = ""  # one line from the extraction's input-level duplicate audit
    input_audit_passed: bool = True  # no two inputs coincide (or no audit recorded)
    H: int | None = None  # attention heads per block (None: not recorded by the extraction)
    d_h: int | None = None  # the head dimension of those heads
    position_mechanism: str = ""  # how positions enter, in words ("": not recorded)

    @property
    def layer_ranges(self) -> str:
        """The extracted layers in few words, e.g. "0–12, random_attention"."""
        return layer_ranges(self.layers)


@dataclass(frozen=True)
class VersionRow:
    """One library and the versions the stages recorded for it."""

    package: str
    versions: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # version -> stages

    @property
    def consistent(self) -> bool:
        return len(self.versions) <= 1


def read_json(path: str | Path) -> dict[str, Any]:
    """A JSON object from disk."""
    return json.loads(Path(path).read_text())


def _first(record: Mapping[str, Any], *keys: str, default: Any = None) -> Any:
    """The first present, non-null value among ``keys``."""
    for key in keys:
        if record.get(key) is not None:
            return record[key]
    return default


def _optional_int(record: Mapping[str, Any], key: str) -> int | None:
    """An integer field, or None where the record predates it or holds none."""
    value = record.get(key)
    return int(value) if isinstance(value, int | float) else None


def _text(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return "" if value is None else str(value)


def models_from_provenance(records: Sequence[Mapping[str, Any]]) -> list[ModelInfo]:
    """One :class:`ModelInfo` per model from the per-layer extraction provenance records."""
    by_model: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for record in records:
        by_model[str(record["model"])].append(record)
    models = []
    for name, group in by_model.items():
        head = group[0]
        warnings: list[str] = []
        for record in group:
            for warning in record.get("warnings") or []:
                if warning not in warnings:
                    warnings.append(str(warning))
        models.append(
            ModelInfo(
                name=name,
                family=_text(_first(head, "family", default="")),
                model_id=_text(_first(head, "model_id", "hub_id", "id", default="")),
                weights_source=_text(_first(head, "weights_source", "weights", default="")),
                checksum=_text(_first(head, "parameter_checksum", "param_checksum", "checksum")),
                data_source=_text(_first(head, "data_source", "data", default="")),
                T=int(head["T"]),
                n=int(head["n"]),
                d=int(head["d"]),
                layers=tuple(sorted({str(r["layer"]) for r in group}, key=layer_order)),
                tokenizer_substitute=_first(head, "tokenizer_substitute"),
                warnings=tuple(warnings),
                description=_first(head, "description"),
                stands_in_for=_first(head, "stands_in_for"),
                weights_origin=_weights_origin(head),
                input_audit=audit_verdict(head["input_audit"]) if head.get("input_audit") else "",
                input_audit_passed=audit_passed(head["input_audit"])
                if head.get("input_audit")
                else True,
                H=_optional_int(head, "heads"),
                d_h=_optional_int(head, "head_dim"),
                position_mechanism=_text(_first(head, "position_mechanism", default="")),
            )
        )
    return models


def layer_order(layer: str) -> tuple[int, str]:
    """Numeric layers first, in order, then named variants (random_attention)."""
    return (int(layer), "") if layer.isdigit() else (10**6, layer)


def layer_ranges(layers: Iterable[str]) -> str:
    """Layers in few words: runs of numbered layers as ranges, then named ones.

    E.g. ["0", "1", "2", "3", "5", "random_attention"] -> "0–3, 5, random_attention".
    """
    numbered = sorted({int(layer) for layer in layers if str(layer).isdigit()})
    named = sorted({str(layer) for layer in layers if not str(layer).isdigit()})
    runs: list[list[int]] = []
    for layer in numbered:
        if runs and layer == runs[-1][-1] + 1:
            runs[-1].append(layer)
        else:
            runs.append([layer])
    parts = [f"{run[0]}–{run[-1]}" if len(run) > 2 else ", ".join(map(str, run)) for run in runs]
    return ", ".join(parts + named) or "—"


def read_table(path: str | Path | None) -> pd.DataFrame | None:
    """A CSV as a DataFrame, or None when the stage did not produce it."""
    if path is None or not Path(path).exists():
        return None
    return pd.read_csv(path)


def verdicts_from_summary(
    summary: pd.DataFrame, profiles: Mapping[tuple[str, str], pd.DataFrame] | None = None
) -> list[LayerVerdicts]:
    """The assumptions stage's outcomes, one per row of its summary, with the P(k) profile."""
    profiles = profiles or {}
    verdicts = []
    for row in summary.to_dict("records"):
        profile = profiles.get((str(row["model"]), str(row["layer"])))
        evidence = evidence_from_row(
            row,
            _profile_column(profile, "p_full_rank"),
            _profile_column(profile, "dependent_bound"),
        )
        verdicts.append(verdicts_from_columns(evidence, row))
    return verdicts


def _profile_column(profile: pd.DataFrame | None, column: str) -> dict[int, float]:
    """{k: value} of one column of a Kruskal profile table (k, p_full_rank, dependent_bound)."""
    if profile is None or "k" not in profile.columns or column not in profile.columns:
        return {}
    return {int(k): float(v) for k, v in zip(profile["k"], profile[column], strict=True)}


def version_table(records: Mapping[str, Iterable[Mapping[str, Any]]]) -> list[VersionRow]:
    """Library versions recorded by each stage's provenance, flagging disagreements."""
    seen: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for stage, stage_records in records.items():
        for record in stage_records:
            for package, version in (record.get("versions") or {}).items():
                seen[package][str(version)].add(stage)
    return [
        VersionRow(package, {v: tuple(sorted(s)) for v, s in sorted(by_version.items())})
        for package, by_version in sorted(seen.items())
        if set(by_version) != {"absent"}
    ]


def _weights_origin(record: Mapping[str, Any]) -> str | None:
    """Package and version, file checksum and forward precision of a provenance record."""
    origin = record.get("weights_origin") or {}
    parts = []
    if origin.get("package"):
        parts.append(f"{origin['package']} {origin.get('package_version', '')}".strip())
    if origin.get("file_sha256"):
        name = Path(str(origin.get("file", ""))).name
        parts.append(f"{name} sha256 {origin['file_sha256'][:12]}")
    if record.get("precision") and record["precision"] != "float32":
        parts.append(f"forward in {record['precision']}")
    return ", ".join(parts) or None
