"""The HTML report: stage outputs in (the assumptions stage's outcomes among them), one
self-contained page out.

The public names are imported on first use (PEP 562), so a caller that needs only the layout
table (the Snakefile) does not import Jinja2 and the page assembly.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_PUBLIC = {
    "ReportInputs": "memcap.report.assemble",
    "build_context": "memcap.report.assemble",
    "write_report": "memcap.report.assemble",
    "render_html": "memcap.report.render",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_PUBLIC[name]), name)
