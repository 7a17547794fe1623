"""Figure titles and captions from the stages' own Snakemake report captions.

Every figure a stage flags with ``report(path, caption=..., labels=...)`` carries an RST caption
(a Jinja template over ``snakemake.wildcards`` and ``snakemake.config``). The page reuses them:
the figure's path gives the wildcards, the template is rendered, and the RST markup is reduced
to plain text (the page escapes it like any other text).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jinja2

_logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CaptionRule:
    """One report-flagged output pattern of the workflow.

    Attributes:
        regex: regular expression of the output path, with one named group per wildcard.
        caption: path of the RST caption file.
        category: the report category (the stage's name for readers).
        labels: the report labels; values may hold ``{wildcard}`` placeholders.
    """

    regex: str
    caption: str
    category: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, entry: Mapping[str, Any]) -> CaptionRule:
        return cls(
            regex=entry["regex"],
            caption=entry["caption"],
            category=entry.get("category") or "",
            labels=dict(entry.get("labels") or {}),
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


def _title(rule: CaptionRule, wildcards: Mapping[str, str], stem: str) -> str:
    """The label naming the figure, else the category and the wildcards that tell it apart."""
    labels = {key: value.format(**wildcards) for key, value in rule.labels.items()}
    if "figure" in labels:
        return labels["figure"][:1].upper() + labels["figure"][1:]
    named = ", ".join(f"{key} {value}" for key, value in labels.items())
    return f"{rule.category}: {named}" if named else rule.category or stem


def describe_figure(
    path: str | Path, rules: Sequence[CaptionRule], config: Mapping[str, Any]
) -> tuple[str, str] | None:
    """(title, caption) of the figure at ``path`` from the first rule whose pattern matches."""
    posix = Path(path).as_posix()
    for rule in rules:
        match = re.search(f"(?:^|/)(?:{rule.regex.removesuffix('$')})$", posix)
        if match is None:
            continue
        wildcards = {k: v for k, v in match.groupdict().items() if v is not None}
        try:
            caption = render_caption(Path(rule.caption).read_text(), wildcards, config)
        except (OSError, jinja2.TemplateError) as err:
            _logger.warning("caption %s of %s not rendered: %s", rule.caption, posix, err)
            caption = ""
        return _title(rule, wildcards, Path(path).stem), caption
    return None
