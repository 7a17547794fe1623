"""Provenance records written next to results: versions, seeds, checksums, config."""

from __future__ import annotations

import hashlib
import json
import platform
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

TRACKED_PACKAGES = (
    "memcap",
    "torch",
    "timm",
    "transformers",
    "datasets",
    "numpy",
    "scipy",
    "pandas",
    "scikit-image",
    "snakemake",
)


def library_versions(packages: Iterable[str] = TRACKED_PACKAGES) -> dict[str, str]:
    """Installed version of each package (``"absent"`` when not installed), plus Python."""
    versions = {"python": platform.python_version()}
    for name in packages:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions


def array_checksum(arrays: Iterable[np.ndarray]) -> str:
    """SHA-256 over the bytes of the given arrays, in order (e.g. a model's parameters)."""
    digest = hashlib.sha256()
    for array in arrays:
        digest.update(memoryview(np.ascontiguousarray(array)).cast("B"))  # no copy
    return digest.hexdigest()


def write_provenance(path: str | Path, **fields: Any) -> dict[str, Any]:
    """Write ``fields`` plus library versions and a UTC timestamp as JSON; return the record."""
    record = {
        **fields,
        "versions": library_versions(),
        "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    Path(path).write_text(json.dumps(record, indent=2, sort_keys=True, default=_jsonable))
    return record


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
