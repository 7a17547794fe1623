"""Render the report context into one self-contained HTML page with Jinja2.

Autoescaping is on for every value, so text that comes from the config (model names, data
sources, the title) cannot inject markup; figures are inlined as base64 ``data:`` URIs and
styles live in the template, so the page needs no other file or URL.
"""

from __future__ import annotations

import base64
import logging
from pathlib import Path
from typing import Any

import jinja2

from memcap.assumptions.verdicts import MIN_SUBSETS
from memcap.numerics.error import CLEAR_DECADES, ERROR_FACTOR

_logger = logging.getLogger(__name__)


def png_data_uri(png: bytes) -> str:
    """A ``data:image/png;base64,...`` URI holding the PNG bytes."""
    if not png.startswith(b"\x89PNG\r\n\x1a\n"):
        raise ValueError("not a PNG file")
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def format_seconds(seconds: float | None) -> str:
    """Wall time as '12.3 s', '4 min 05 s' or '1 h 02 min'."""
    if seconds is None:
        return "—"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def format_number(value: Any, digits: int = 3) -> str:
    """Numbers for tables: integers as is, floats to ``digits`` significant digits."""
    if value is None:
        return "—"
    if isinstance(value, float):
        if value != value:  # NaN
            return "—"
        if abs(value) < 1e-9:  # least-squares round-off (1e-16) reads as what it is: zero
            return "0"
        if value.is_integer() and abs(value) < 1e12:
            return str(int(value))
        return f"{value:.{digits}g}"
    return str(value)


def format_megabytes(value: float | None) -> str:
    """Memory in MB as a whole number with thousands separators ('2,420'); None as a dash."""
    return "—" if value is None else f"{value:,.0f}"


def breakable(name: str) -> str:
    """A column name that may wrap after its underscores (a zero-width space after each)."""
    return name.replace("_", "_\u200b")


def environment(template_dir: str | Path) -> jinja2.Environment:
    """A Jinja2 environment that escapes everything and fails on undefined names."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_dir)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["data_uri"] = png_data_uri
    env.filters["seconds"] = format_seconds
    env.filters["num"] = format_number
    env.filters["mb"] = format_megabytes
    env.filters["breakable"] = breakable
    env.globals.update(
        min_subsets=MIN_SUBSETS,
        error_factor=f"{ERROR_FACTOR:g}",
        clear_decades=f"{CLEAR_DECADES:g}",
    )
    return env


def render_html(template_path: str | Path, **context: Any) -> str:
    """Render ``template_path`` with ``context`` into an HTML string."""
    template_path = Path(template_path)
    template = environment(template_path.parent).get_template(template_path.name)
    html = template.render(**context)
    _logger.info("rendered %s (%.0f kB)", template_path.name, len(html) / 1e3)
    return html
