"""Input-level duplicate audit: do two of the T examples share their input?

A "fail" of the query-level Kruskal certificates (dependent pairs, rank-deficient subsets)
can come from the model or from the inputs themselves. This audit looks only at the inputs:
identical token windows, windows cut from overlapping spans of one document, identical
images, crops that overlap in the same photograph, and near-identical thumbnails. It is
written into each extraction's provenance and shown in the report beside the certificates.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

NEAR_IDENTICAL_COSINE = 0.99  # centred thumbnails at least this similar are near-identical


def _identical_pairs(rows: Sequence[bytes]) -> int:
    """Number of unordered pairs of equal rows."""
    return sum(c * (c - 1) // 2 for c in Counter(rows).values())


def text_audit(
    tokens: np.ndarray, documents: np.ndarray, offsets: np.ndarray, stream: bool
) -> dict[str, Any]:
    """Duplicates among T token windows (T, length) cut from ``documents`` at ``offsets``."""
    length = tokens.shape[1]
    overlapping = 0
    by_document: dict[int, list[int]] = {}
    for doc, offset in zip(documents.tolist(), offsets.tolist(), strict=True):
        by_document.setdefault(doc, []).append(offset)
    for starts in by_document.values():
        starts.sort()
        overlapping += sum(
            1 for i, a in enumerate(starts) for b in starts[i + 1 :] if b - a < length
        )
    shared = sum(len(s) for s in by_document.values() if len(s) > 1)
    return {
        "kind": "text",
        "examples": int(len(tokens)),
        "distinct_documents": len(by_document),
        "document_kind": "disjoint tiles of one stream" if stream else "documents",
        "examples_sharing_a_document": shared,
        "identical_windows": _identical_pairs([row.tobytes() for row in tokens]),
        "overlapping_windows": overlapping,
    }


Box = tuple[int, int, int, int] | None  # crop box in its photograph; None = whole image
Region = tuple[int, Box]  # (photograph index, box)


def image_audit(
    thumbnails: np.ndarray,
    inputs: Sequence[Sequence[Region]],
    source_count: int,
    cosine: float = NEAR_IDENTICAL_COSINE,
) -> dict[str, Any]:
    """Duplicates among T image inputs.

    Args:
        thumbnails: (T, ...) small renderings of the inputs (any fixed size).
        inputs: per input, the photograph regions it is made of (one, or a mosaic's tiles).
        source_count: number of photographs in the source.
        cosine: centred-cosine threshold of a near-identical pair.
    """
    x = thumbnails.reshape(len(thumbnails), -1).astype(np.float64)
    identical = _identical_pairs([row.tobytes() for row in np.ascontiguousarray(thumbnails)])
    centred = x - x.mean(axis=1, keepdims=True)
    norms = np.linalg.norm(centred, axis=1)
    unit = centred / np.where(norms > 0, norms, 1.0)[:, None]
    similarity = unit @ unit.T
    upper = similarity[np.triu_indices(len(x), k=1)]
    per_source = Counter(int(source) for regions in inputs for source, _ in set(regions))
    return {
        "kind": "image",
        "examples": int(len(x)),
        "source_photographs": int(source_count),
        "photographs_used": len(per_source),
        "max_inputs_per_photograph": max(per_source.values(), default=0),
        "identical_images": identical,
        "overlapping_crops": _overlapping_inputs(inputs),
        "near_identical_pairs": int((upper >= cosine).sum()),
        "near_identical_cosine": cosine,
        "max_pair_cosine": float(upper.max()) if upper.size else None,
        "flat_inputs": int((norms == 0).sum()),
    }


def _overlapping_inputs(inputs: Sequence[Sequence[Region]]) -> int:
    """Pairs of inputs that show a common part of some photograph."""
    by_source: dict[int, list[tuple[int, Box]]] = {}
    for index, regions in enumerate(inputs):
        for source, box in regions:
            by_source.setdefault(int(source), []).append((index, box))
    pairs: set[tuple[int, int]] = set()
    for regions in by_source.values():
        for i, (a, box_a) in enumerate(regions):
            for b, box_b in regions[i + 1 :]:
                if a != b and (box_a is None or box_b is None or _intersects(box_a, box_b)):
                    pairs.add((min(a, b), max(a, b)))
    return len(pairs)


def _intersects(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> bool:
    """Whether two boxes share pixels."""
    return min(a[2], b[2]) > max(a[0], b[0]) and min(a[3], b[3]) > max(a[1], b[1])


def audit_passed(audit: dict[str, Any]) -> bool:
    """Whether no two inputs coincide or overlap (text) or coincide or nearly so (images)."""
    if audit["kind"] == "text":
        return audit["identical_windows"] + audit["overlapping_windows"] == 0
    return audit["identical_images"] + audit["near_identical_pairs"] == 0


def audit_verdict(audit: dict[str, Any]) -> str:
    """One line: whether any two inputs coincide or overlap."""
    if audit["kind"] == "text":
        what = (
            f"{audit['identical_windows']} identical and {audit['overlapping_windows']} "
            f"overlapping window pairs, {audit['distinct_documents']} distinct documents"
        )
    else:
        what = (
            f"{audit['identical_images']} identical and {audit['near_identical_pairs']} "
            f"near-identical image pairs, {audit['overlapping_crops']} pairs sharing a "
            "photograph region, "
            f"{audit['photographs_used']} photographs"
        )
    return ("inputs distinct: " if audit_passed(audit) else "inputs duplicated: ") + what
