"""The tables of a fine cut's jobs joined as text, for the tests of the cuts.

A setting job writes its setting's rows with the same columns and formatting as the sweep's
job; :func:`concat_tables` joins the files as text (the header once), so the joined table is
the sweep job's byte for byte wherever its rows come in setting order. The workflow never
joins them: each stage's summary reads every job's table, in the order of the sweeps' rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


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
