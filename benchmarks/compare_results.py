"""Compare two results folders: every CSV and NPY of one must equal its twin in the other.

A refactoring that must not change behaviour is checked by running the same config before
and after it and comparing the results folders:

    python benchmarks/compare_results.py BEFORE/results AFTER/results \
        [--map old/path=new/path ...] [--only synthetic aot capacity]

CSV files are read with pandas and compared exactly (values, dtypes, column order), leaving
out columns whose names mention time, seconds, timestamps or dates; NPY files must be equal
with :func:`numpy.array_equal` (NaN equal to NaN). ``--map`` pairs a file (or folder) that moved:
``old`` is its path under the first folder, ``new`` under the second. Prints every difference
and exits 1 if there is one, else prints the number of files compared and exits 0.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

# Columns that record when or how long, not what: they differ between any two runs.
VOLATILE = re.compile(r"time|seconds|timestamp|date", re.IGNORECASE)
SUFFIXES = (".csv", ".npy")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path, help="first results folder")
    parser.add_argument("after", type=Path, help="second results folder")
    parser.add_argument(
        "--map",
        action="append",
        default=[],
        metavar="OLD=NEW",
        help="a moved file or folder: its path under BEFORE = its path under AFTER",
    )
    parser.add_argument(
        "--only", nargs="*", default=None, help="compare only these subfolders of BEFORE"
    )
    return parser.parse_args(argv)


def moved_path(relative: str, mapping: dict[str, str]) -> str:
    """Where ``relative`` (a path under the first folder) lies under the second."""
    for old, new in mapping.items():
        if relative == old or relative.startswith(old.rstrip("/") + "/"):
            return new + relative[len(old) :]
    return relative


def compare_csv(before: Path, after: Path) -> list[str]:
    """Differences between two CSV tables, volatile columns left out."""
    left, right = pd.read_csv(before), pd.read_csv(after)
    left = left[[c for c in left.columns if not VOLATILE.search(c)]]
    right = right[[c for c in right.columns if not VOLATILE.search(c)]]
    if list(left.columns) != list(right.columns):
        return [f"columns differ: {list(left.columns)} vs {list(right.columns)}"]
    if left.shape != right.shape:
        return [f"shape differs: {left.shape} vs {right.shape}"]
    problems = []
    for column in left.columns:
        a, b = left[column], right[column]
        if a.dtype != b.dtype:
            problems.append(f"column {column}: dtype {a.dtype} vs {b.dtype}")
            continue
        unequal = ~((a == b) | (a.isna() & b.isna()))
        if unequal.any():
            row = int(np.flatnonzero(unequal.to_numpy())[0])
            problems.append(
                f"column {column}: {int(unequal.sum())} rows differ, first at row {row}: "
                f"{a.iloc[row]!r} vs {b.iloc[row]!r}"
            )
    return problems


def compare_npy(before: Path, after: Path) -> list[str]:
    """Differences between two NPY arrays (shape, dtype, values)."""
    a, b = np.load(before), np.load(after)
    if a.shape != b.shape or a.dtype != b.dtype:
        return [f"array {a.shape} {a.dtype} vs {b.shape} {b.dtype}"]
    unequal = a != b
    if np.issubdtype(a.dtype, np.inexact):
        unequal &= ~(np.isnan(a) & np.isnan(b))
    if unequal.any():
        return [f"{int(unequal.sum())} of {a.size} entries differ"]
    return []


def compare_folders(
    before: Path, after: Path, mapping: dict[str, str], only: list[str] | None = None
) -> tuple[int, list[str]]:
    """The number of files compared and every difference, as readable lines."""
    roots = [before / name for name in only] if only else [before]
    files = sorted(
        p for root in roots for p in root.rglob("*") if p.is_file() and p.suffix in SUFFIXES
    )
    differences = []
    for path in files:
        relative = path.relative_to(before).as_posix()
        twin = after / moved_path(relative, mapping)
        if not twin.exists():
            differences.append(f"{relative}: missing in {after} (looked for {twin})")
            continue
        compare = compare_csv if path.suffix == ".csv" else compare_npy
        differences += [f"{relative}: {problem}" for problem in compare(path, twin)]
    return len(files), differences


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    mapping = dict(entry.split("=", 1) for entry in args.map)
    count, differences = compare_folders(args.before, args.after, mapping, args.only)
    if count == 0:
        print(f"no CSV or NPY files found under {args.before}")
        return 1
    for line in differences:
        print(line)
    if differences:
        print(f"{len(differences)} differences in {count} files compared")
        return 1
    print(f"{count} files compared: identical (columns named like time/date left out)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
