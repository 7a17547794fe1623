"""Typed extraction settings: one ``extract.models`` entry, its data, the stage-wide settings.

Dataclasses and the vocabulary they use (families, precisions, data sources) only:
``entries.py`` builds them from the config, ``checks.py`` checks them. Nothing here imports
torch or reads files, so every other extract module can build on it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from memcap.errors import ConfigError
from memcap.extract.layer_spec import RANDOM_ATTENTION, Layer, LayerSpec

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
# What the extraction reads per family kind: a stack of attention blocks over the whole token
# sequence, an encoder-decoder's encoder stack, or windowed attention (memcap.extract.families).
SUPPORTED = {
    "vit": "timm VisionTransformer (vit_*, deit_*, DINOv2), BEiT (beit*), EVA-02 (eva02_*) and "
    "Swin (swin_*, swinv2_*) models, and transformers ViT, DeiT, DINOv2, BEiT, Swin and "
    "CLIP / SigLIP vision encoders",
    "encoder": "encoder-only transformers models (BERT, RoBERTa, ALBERT, DeBERTa, MiniLM, ...) "
    "and the encoders of encoder-decoders (T5, Flan-T5, BART, mBART)",
    "decoder": "decoder-only transformers models (GPT-2, Llama, Mistral, Qwen, BLOOM, "
    "SmolLM2, ...)",
}


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


DEPTH_PROFILE_BLOCKS = 3  # numbered layers that earn a depth profile without a depth row


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
    detail_layers: tuple[Layer, ...] = ()  # audited in full (see entries.with_resolved)
    model_kwargs: Mapping[str, Any] = field(default_factory=dict)
    n: int | None = None  # None: family default (see inputs.resolve_n)
    # None: 0 for vit / bert ([CLS]; a Swin window's first token; T5's first token), -1 for
    # decoders (the last token)
    query_index: int | None = None
    tokenizer: str | None = None  # None: the model's own; else a named substitute
    bos: bool | None = None  # decoders: prepend the tokenizer's BOS token; None: auto
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
    def has_depth_profile(self) -> bool:
        """Whether the model's assumptions are drawn along its depth: it has a depth row, or
        at least ``DEPTH_PROFILE_BLOCKS`` numbered layers (fewer show no trend)."""
        blocks = sum(isinstance(layer, int) for layer in self.layers)
        return bool(self.depth_rows) or blocks >= DEPTH_PROFILE_BLOCKS

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
    error_examples: int = 32  # examples the float64 pass measures the forward error on


def entry_error(err: ConfigError, index: int, name: Any) -> ConfigError:
    """``err`` naming the user's entry by its ``name`` beside the index its key gives
    (``extract.models[2].n``: model 'bloom-tiny': ...); unchanged where it names it already."""
    tag = f"model '{name}'"
    if tag in err.problem:
        return err
    return ConfigError(err.key, f"{tag}: {err.problem}", err.fix)
