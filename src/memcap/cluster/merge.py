"""Merge the outputs of a fine cut into those of the coarse one.

A per-setting job writes its setting's rows with the same columns and formatting as the
sweep's job; :func:`concat_tables` joins the files as text (the header once), so the merged
table is the sweep job's byte for byte wherever its rows come in setting order. The merged
provenance keeps every setting's record under ``settings``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memcap.provenance import write_provenance


def concat_tables(paths: Sequence[str | Path], out: str | Path) -> int:
    """Write the CSV files ``paths`` one after another into ``out``, their common header once;
    the number of data rows."""
    header, body = None, []
    for path in paths:
        lines = Path(path).read_text().splitlines(keepends=True)
        if not lines:
            raise ValueError(f"{path} is empty: not a table written by a setting job")
        if header is not None and lines[0] != header:
            raise ValueError(f"{path}'s columns differ from {paths[0]}'s")
        header = lines[0]
        body += lines[1:]
    if header is None:
        raise ValueError("no table to merge")
    Path(out).write_text(header + "".join(body))
    return len(body)


def merge_provenance(
    paths: Mapping[str, str | Path], out: str | Path, **fields: Any
) -> dict[str, Any]:
    """One provenance record for the merged outputs: ``fields``, the summed wall time and each
    part's own record by its id (``paths``: id -> that part's provenance file)."""
    parts = {key: json.loads(Path(path).read_text()) for key, path in paths.items()}
    wall = sum(part.get("wall_seconds", 0.0) for part in parts.values())
    return write_provenance(out, **fields, wall_seconds=round(wall, 2), settings=parts)
