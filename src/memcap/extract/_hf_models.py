"""transformers models of every family: encoders, causal decoders and vision encoders.

The encoder-decoders' (T5, BART, mBART) encoder stack is the model of family ``encoder``:
T5-style configs build their ``*EncoderModel`` class (the decoder is neither built nor
loaded), the others the whole model, of which only ``get_encoder()`` is kept; the decoder is
never run.

Random weights come from the library's initialisation of a config (a config class such as
``LlamaConfig`` with ``model_kwargs``, or a hub id's / directory's config); pretrained, local
and GGUF weights through ``AutoModel.from_pretrained`` (safetensors, or ``.bin`` files that
transformers reads with ``weights_only``); repository code only with ``trust_remote_code``.
"""

from __future__ import annotations

import copy
import difflib
import inspect
import logging
import os
from pathlib import Path
from typing import Any

import torch

from memcap.errors import ConfigError
from memcap.extract.config import ModelEntry
from memcap.extract.weights import gguf_location, package_root, weights_path, weights_route

_logger = logging.getLogger(__name__)

WEIGHT_FILES = "weights file (model.safetensors, pytorch_model.bin or their sharded index)"


def hf_config(entry: ModelEntry, local_only: bool = False) -> Any:
    """The entry's transformers config, without loading weights (``local_only``: from files
    and the Hugging Face cache only, never the network).

    Raises:
        ConfigError: unknown config class or model id, remote code without opt-in, or a
            GGUF file without the ``gguf`` package.
    """
    import transformers
    from transformers import AutoConfig

    kwargs = dict(entry.model_kwargs)
    if entry.is_architecture and weights_path(entry) is None:
        config_class = getattr(transformers, entry.model, None)
        if config_class is None:
            raise ConfigError(
                f"{entry.key}.model",
                f"transformers has no config class '{entry.model}'",
                "use a class such as BertConfig, RobertaConfig, GPT2Config, LlamaConfig, "
                "ViTConfig, or a hub id / directory",
            )
        check_config_fields(entry, config_class)
        return config_class(**kwargs)
    origin, extra = load_origin(entry)
    try:
        return AutoConfig.from_pretrained(origin, local_files_only=local_only, **extra, **kwargs)
    except OSError as err:
        raise unreachable(entry, origin, err) from None
    except ValueError as err:
        raise _value_error(entry, origin, err) from None


def check_config_fields(entry: ModelEntry, config_class: Any) -> None:
    """Every ``model_kwargs`` key must be a field of the config class.

    transformers keeps an unknown keyword as a plain attribute, so a misspelt size
    (``hiden_size``) would silently build the class's default architecture instead.

    Raises:
        ConfigError: a key the class does not know, with the closest known names.
    """
    fields = set(inspect.signature(config_class.__init__).parameters) - {"self", "kwargs"}
    fields |= set(config_class().to_dict()) | set(getattr(config_class, "attribute_map", {}))
    for name in entry.model_kwargs:
        if name not in fields:
            close = difflib.get_close_matches(name, sorted(fields), n=3)
            hint = f"did you mean {' or '.join(close)}? " if close else ""
            raise ConfigError(
                f"{entry.key}.model_kwargs.{name}",
                f"'{name}' is not a field of {config_class.__name__}",
                f"{hint}use the config class's own field names (see its documentation)",
            )


def load_origin(entry: ModelEntry) -> tuple[str, dict[str, Any]]:
    """(directory or hub id, keyword arguments) for ``from_pretrained`` of the entry."""
    extra: dict[str, Any] = {"trust_remote_code": entry.trust_remote_code}
    gguf = gguf_location(entry)
    if gguf is not None:
        if package_root("gguf") is None:
            raise ConfigError(
                f"{entry.key}.gguf_file",
                "reading GGUF weights needs the 'gguf' package, which is not installed",
                "install it (`uv pip install gguf accelerate`) or use a save_pretrained directory",
            )
        return gguf[0], {**extra, "gguf_file": gguf[1]}
    path = weights_path(entry)
    return (entry.model if path is None else str(path)), extra


def create_hf_model(
    entry: ModelEntry, config: Any, dtype: torch.dtype, device: torch.device
) -> tuple[Any, str, list]:
    """(base model in eval mode, weights description, warnings) of the entry.

    The base model (``AutoModel``: no LM / classification head); for CLIP-style configs with a
    vision part, the vision tower; for an encoder-decoder, its encoder stack. Random weights
    are drawn on ``device`` at ``dtype`` directly: a 7B model in bfloat16 never exists as a
    float32 copy, nor on the host when ``device`` is a GPU. Pretrained weights load on the
    host and the job moves them.
    """
    from transformers import AutoModel

    warnings: list[str] = []
    route = weights_route(entry)
    if route == "random":
        torch.manual_seed(entry.seed)
        with torch.device(device):
            model = _from_config(config, entry, dtype)
        where = f"seed {entry.seed}, drawn on {device.type} in {str(dtype).removeprefix('torch.')}"
        return model, f"random (transformers init, {where})", warnings
    origin, extra = load_origin(entry)
    if entry.device_map is not None:
        extra["device_map"] = entry.device_map
    vision = _vision_class(config)
    model_class, given = (
        (vision, config.vision_config) if vision else (_encoder_class(config) or AutoModel, config)
    )
    try:
        model, info = model_class.from_pretrained(
            origin, config=copy.deepcopy(given), dtype=dtype, output_loading_info=True, **extra
        )
    except OSError as err:
        raise unreachable(entry, origin, err) from None
    except ValueError as err:
        raise _value_error(entry, origin, err) from None
    missing = sorted(info.get("missing_keys", []))
    if missing:
        warnings.append(f"weights missing from the checkpoint, left random: {missing}")
    source = {
        "pretrained": f"pretrained {entry.model} (Hugging Face hub / cache)",
        "gguf": f"GGUF file {extra.get('gguf_file')} (quantized weights dequantized to {dtype})",
    }.get(route, f"pretrained from {entry.weights}")
    return _encoder_stack(model, config), source, warnings


def meta_model(config: Any, entry: ModelEntry) -> Any:
    """The entry's model on the meta device: its modules without memory or initialisation."""
    with torch.device("meta"):
        return _from_config(config, entry, torch.float32)


def _from_config(config: Any, entry: ModelEntry, dtype: torch.dtype) -> Any:
    from transformers import AutoModel

    vision = _vision_class(config)
    if vision is not None:
        return vision._from_config(config.vision_config, dtype=dtype)
    encoder = _encoder_class(config)
    if encoder is not None:  # (its __init__ rewrites the config it is given: a copy)
        return _encoder_stack(encoder._from_config(copy.deepcopy(config), dtype=dtype), config)
    model = AutoModel.from_config(config, dtype=dtype, trust_remote_code=entry.trust_remote_code)
    return _encoder_stack(model, config)


def _encoder_class(config: Any) -> Any:
    """T5-style encoder-decoders: their encoder-only model class (T5EncoderModel, ...)."""
    if not getattr(config, "is_encoder_decoder", False):
        return None
    import transformers

    return getattr(
        transformers, type(config).__name__.removesuffix("Config") + "EncoderModel", None
    )


def _encoder_stack(model: Any, config: Any) -> Any:
    """The encoder stack (embeddings and encoder blocks) of a model of an encoder-decoder's
    ``config`` (T5EncoderModel's own config no longer says so); any other model itself."""
    return model.get_encoder() if getattr(config, "is_encoder_decoder", False) else model


def _vision_class(config: Any) -> Any:
    """CLIP / SigLIP-style configs: their vision tower's model class (else None)."""
    if getattr(config, "vision_config", None) is None:
        return None
    import transformers

    name = type(config).__name__.removesuffix("Config") + "VisionModel"
    return getattr(transformers, name, None)


def token_types(model: Any) -> bool:
    """Whether the model takes segment (token type) ids for sentence pairs."""
    types = getattr(model.config, "type_vocab_size", 0) or 0
    return types >= 2 and "token_type_ids" in inspect.signature(model.forward).parameters


def image_data_config(entry: ModelEntry, config: Any) -> tuple[dict[str, Any], str | None]:
    """The model's own image processor as a timm data config (resize, crop, mean, std).

    A vision tower's config gives the input size; its processor (from the same directory or
    hub id, when available) gives resizing and normalisation. Without one (a directory with
    no ``preprocessor_config.json``, an uncached hub id) ViT's defaults are used, and the
    second value says so (a warning for provenance); else it is None.
    """
    vision = getattr(config, "vision_config", None) or config
    size = int(vision.image_size)
    settings: dict[str, Any] = {
        "input_size": (3, size, size),
        "interpolation": "bilinear",
        "mean": (0.5, 0.5, 0.5),
        "std": (0.5, 0.5, 0.5),
        "crop_pct": 1.0,
        "crop_mode": "squash",
    }
    if entry.is_architecture and weights_path(entry) is None:
        return settings, None
    from transformers import AutoImageProcessor

    origin, extra = load_origin(entry)
    try:
        processor = AutoImageProcessor.from_pretrained(origin, **extra)
    except (OSError, ValueError) as err:
        _logger.debug("no image processor for %s: %s", origin, err)
        where = "holds no preprocessor_config.json" if Path(origin).is_dir() else "is unreachable"
        return settings, (
            f"no image processor: '{origin}' {where}; images are resized to {size} x {size} "
            "(bilinear) and normalised with mean = std = 0.5 (ViT's defaults). Save the "
            "model's image processor there (processor.save_pretrained) to use its own"
        )
    settings["mean"] = tuple(processor.image_mean)
    settings["std"] = tuple(processor.image_std)
    resample = int(getattr(processor, "resample", 2))
    settings["interpolation"] = {2: "bilinear", 3: "bicubic"}.get(resample, "bilinear")
    crop = (
        getattr(processor, "crop_size", None) if getattr(processor, "do_center_crop", 0) else None
    )
    resize = dict(getattr(processor, "size", {}) or {})
    short = resize.get("shortest_edge")
    if crop and short:
        settings["input_size"] = (3, int(crop["height"]), int(crop["width"]))
        settings["crop_pct"] = int(crop["height"]) / int(short)
        settings["crop_mode"] = "center"
    return settings, None


def _value_error(entry: ModelEntry, origin: str, err: ValueError) -> ConfigError:
    text = str(err)
    if "trust_remote_code" in text:
        return ConfigError(
            f"{entry.key}.trust_remote_code",
            f"'{origin}' needs its repository's own Python code to build",
            "set trust_remote_code: true for this model if you trust that repository (it "
            "allows running the repository's modelling code on this machine)",
        )
    return ConfigError(f"{entry.key}.model", f"cannot build '{origin}': {text}", "check the id")


def unreachable(entry: ModelEntry, origin: str, err: OSError) -> ConfigError:
    """One-line error for weights that are neither cached nor downloadable, or a local
    directory that lacks the config or the weights."""
    _logger.debug("loading %s failed: %s", origin, err)
    if Path(origin).is_dir():
        lacking = "config.json" if not (Path(origin) / "config.json").exists() else WEIGHT_FILES
        return ConfigError(
            f"{entry.key}.weights",
            f"the directory '{origin}' of model '{entry.name}' holds no {lacking}",
            "save the model there with model.save_pretrained(directory), or keep its "
            f"config.json and set model: {origin} with weights: random (its architecture, "
            "randomly initialised)",
        )
    cache = os.environ.get("HF_HOME", "~/.cache/huggingface")
    offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0", "false", "False")
    why = "HF_HUB_OFFLINE is set" if offline else "the hub is unreachable"
    return ConfigError(
        f"{entry.key}.weights",
        f"cannot load '{origin}' for model '{entry.name}': it is not in the Hugging Face cache "
        f"({cache}) and {why}",
        f"either (1) fetch it once where the hub is reachable (`hf download {origin}`, or run "
        "this job online) so it lands in the cache, or (2) set weights to a local "
        "save_pretrained directory or timm checkpoint file (or weights: random)",
    )
