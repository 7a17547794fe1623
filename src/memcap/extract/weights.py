"""Where a model's weights come from: the route, the file, and its provenance (torch-free).

Routes: ``random`` (library initialisation), ``pretrained`` (Hugging Face hub id, through the
cache), ``local`` (a ``save_pretrained`` directory or a timm checkpoint file), ``gguf`` (a
GGUF file, dequantized by transformers) and ``onnx`` (an ONNX graph whose vision backbone the
workflow converts once into a safetensors checkpoint, see ``onnx_weights.py``). Weights in a
Python package are named ``package:<module>[/<path inside>]`` and found without importing the
package (its ``__init__`` may need dependencies that are not installed).
"""

from __future__ import annotations

import hashlib
import importlib.util
from importlib import metadata
from pathlib import Path
from typing import Any

from memcap.errors import ConfigError
from memcap.extract.config import ModelEntry

PACKAGE_PREFIX = "package:"
MODEL_FILE_SUFFIXES = (".gguf", ".onnx", ".safetensors")


def package_root(module: str) -> Path | None:
    """Directory of an installed package, found without importing it (None: not installed)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def resolve_package_path(spec: str, key: str = "weights") -> Path:
    """Weights shipped inside a Python package, located without importing it.

    ``package:<module>/<path>`` is that path inside the package. ``package:<module>`` is the
    package's model: the shallowest directory holding a ``config.json``, else its single
    ``.gguf`` / ``.onnx`` / ``.safetensors`` file.

    Raises:
        ConfigError: the package is not installed or holds no (or several) model files.
    """
    module, _, inner = spec.removeprefix(PACKAGE_PREFIX).partition("/")
    root = package_root(module)
    if root is None:
        raise ConfigError(
            key,
            f"Python package '{module}' is not installed",
            f"install it (e.g. `uv pip install {module.replace('_', '-')}`) or use a path",
        )
    if inner:
        return root / inner
    configs = sorted(root.rglob("config.json"), key=lambda p: len(p.parts))
    if configs:
        return configs[0].parent
    files = [p for suffix in MODEL_FILE_SUFFIXES for p in sorted(root.rglob(f"*{suffix}"))]
    if len(files) != 1:
        raise ConfigError(
            key,
            f"package '{module}' holds {len(files)} model files and no config.json directory",
            f"name the file: {spec}/<path inside the package>",
        )
    return files[0]


def weights_path(entry: ModelEntry) -> Path | None:
    """The local file or directory behind the entry's weights (None: random / hub)."""
    if entry.weights in ("random", "pretrained"):
        return None
    if entry.weights.startswith(PACKAGE_PREFIX):
        return resolve_package_path(entry.weights, f"{entry.key}.weights")
    return Path(entry.weights).expanduser()


def gguf_location(entry: ModelEntry) -> tuple[str, str] | None:
    """(directory or hub id, file name) of GGUF weights, or None for other routes."""
    path = weights_path(entry)
    if path is not None and path.suffix == ".gguf":
        return str(path.parent), path.name
    if entry.gguf_file is None:
        return None
    return (entry.model if path is None else str(path)), entry.gguf_file


def weights_route(entry: ModelEntry) -> str:
    """random, pretrained, local, gguf or onnx.

    Raises:
        ConfigError: a path that does not exist.
    """
    if gguf_location(entry) is not None:
        return "gguf"
    path = weights_path(entry)
    if path is None:
        return entry.weights
    key = f"{entry.key}.weights"
    if not path.exists():
        raise ConfigError(
            key,
            f"'{entry.weights}' is neither random, pretrained, package:<module> nor an "
            "existing path",
            "point it at a save_pretrained directory, a timm checkpoint, a .gguf or an .onnx file",
        )
    if path.suffix == ".onnx":
        return "onnx"
    return "local"


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def weights_provenance(entry: ModelEntry, path: Path | None = None) -> dict[str, Any]:
    """Where the weights came from: route, package and version, file and its checksum.

    Args:
        entry: the config entry.
        path: the file actually loaded, when it differs from the configured one (the
            converted checkpoint of an ONNX graph).
    """
    record: dict[str, Any] = {"route": weights_route(entry)}
    if entry.weights.startswith(PACKAGE_PREFIX):
        module = entry.weights.removeprefix(PACKAGE_PREFIX).partition("/")[0]
        distribution = metadata.packages_distributions().get(module, [module])[0]
        record["package"] = distribution
        record["package_version"] = metadata.version(distribution)
    source = weights_path(entry)
    gguf = gguf_location(entry)
    if gguf is not None and Path(gguf[0]).is_dir():
        source = Path(gguf[0]) / gguf[1]
    if source is not None and source.is_file():
        record["file"] = str(source)
        record["file_sha256"] = file_sha256(source)
    if path is not None:
        record["converted_file"] = str(path)
        record["converted_sha256"] = file_sha256(path)
    return record
