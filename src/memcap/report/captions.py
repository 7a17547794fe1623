"""Figure titles and captions from the stages' own Snakemake report captions.

Every figure a stage flags with ``report(path, caption=..., labels=...)`` carries an RST caption
(a Jinja template over ``snakemake.wildcards`` and ``snakemake.config``). The page reuses them:
the workflow names each figure with its caption file, labels and wildcards (a
:class:`FigureSpec`), the template is rendered, and the RST markup is reduced to plain text
(the page escapes it like any other text).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jinja2

_logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FigureSpec:
    """One figure the page embeds, as the workflow flags it for ``snakemake --report``.

    Attributes:
        path: the PNG file.
        caption: path of the RST caption file.
        category: the report category (the stage's name for readers).
        labels: the report labels, wildcards filled in.
        wildcards: the wildcards of the job that wrote the figure.
    """

    path: str
    caption: str
    category: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    wildcards: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, entry: Mapping[str, Any]) -> FigureSpec:
        return cls(
            path=str(entry["path"]),
            caption=str(entry["caption"]),
            category=entry.get("category") or "",
            labels=dict(entry.get("labels") or {}),
            wildcards=dict(entry.get("wildcards") or {}),
        )


def rst_to_text(rst: str) -> str:
    """Plain text of a short RST caption: inline markup removed, lines joined."""
    text = re.sub(r"\*\*(.+?)\*\*", r"\1", rst, flags=re.S)
    text = re.sub(r"``(.+?)``", r"\1", text, flags=re.S)
    text = re.sub(r"`([^`]+?)`_?", r"\1", text)
    return re.sub(r"\s+", " ", text).strip()


def render_caption(template: str, wildcards: Mapping[str, str], config: Mapping[str, Any]) -> str:
    """Render a Snakemake caption template the way ``snakemake --report`` does, as plain text."""
    env = jinja2.Environment(undefined=jinja2.ChainableUndefined, autoescape=False)
    snakemake = SimpleNamespace(wildcards=SimpleNamespace(**wildcards), config=config)
    return rst_to_text(env.from_string(template).render(snakemake=snakemake))


def _title(spec: FigureSpec) -> str:
    """The label naming the figure, else the category and the labels that tell it apart."""
    if "figure" in spec.labels:
        return spec.labels["figure"][:1].upper() + spec.labels["figure"][1:]
    named = ", ".join(f"{key} {value}" for key, value in spec.labels.items())
    if named:
        return f"{spec.category}: {named}" if spec.category else named
    return spec.category or Path(spec.path).stem


def describe_figure(spec: FigureSpec, config: Mapping[str, Any]) -> tuple[str, str]:
    """(title, caption) of a figure, its caption rendered with its wildcards and the config."""
    try:
        caption = render_caption(Path(spec.caption).read_text(), spec.wildcards, config)
    except (OSError, jinja2.TemplateError) as err:
        _logger.warning("caption %s of %s not rendered: %s", spec.caption, spec.path, err)
        caption = ""
    return _title(spec), caption
