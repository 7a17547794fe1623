"""The outcome of a check against its decision band (no torch: the report reads it)."""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    """Where a check falls against the band (``not tested``: nothing to decide on)."""

    APPLIES = "applies"
    DOES_NOT_APPLY = "does not apply"
    TOO_CLOSE = "too close to call"
    NOT_TESTED = "not tested"

    @property
    def slug(self) -> str:
        """One word for CSS classes and file names."""
        return {"applies": "applies", "does not apply": "fails", "too close to call": "close"}.get(
            self.value, "untested"
        )
