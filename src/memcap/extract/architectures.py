"""Every entry's architecture resolved before any job: the dry run stops on one it cannot read.

:func:`check_architecture` resolves an ``extract.models`` entry the way its job will
(:func:`memcap.extract.registry.architecture`: timm's registry on the meta device, the
transformers config of a config class, a local or package directory, the Hugging Face cache
or a GGUF header), without weights and without the network, and raises
:class:`~memcap.errors.ConfigError` naming the key, the class and why
(:mod:`memcap.extract.families`): a model without attention (ConvNeXt, MLP-Mixer), a
state-space model (Mamba), or a config without the sizes the extraction uses. An entry whose
config is only on the hub (not in the cache) is resolved at its job's start, before weights
load.

Resolving imports torch and timm / transformers, seconds of CPU per Snakemake invocation.
The outcome is kept in a small JSON file (``$MEMCAP_CACHE_DIR``, else the user's cache
directory: ``$XDG_CACHE_HOME/memcap`` or ``~/.cache/memcap``) under a key of everything it
depends on: the entry's model keys, the size and time of every file read, the library
versions and this code. A repeated dry run reads it back without importing either library.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

from memcap.errors import ConfigError
from memcap.extract.config import ModelEntry
from memcap.extract.weights import gguf_location, weights_path

_CACHE_FILE = "architectures.json"
# The code whose rules decide an outcome: a change to any of them resolves anew.
_RULES = (
    "architectures.py",
    "registry.py",
    "_hf_models.py",
    "_timm_models.py",
    "config.py",
    "families.py",
    "windows.py",
    "layers.py",
    "positions.py",
)
_LIBRARIES = ("timm", "transformers", "gguf", "torch")
# The entry's key in a stored outcome: the same model at another index reads it back with its own.
_ENTRY = "extract.models[*]"
_SEEN: dict[str, dict] = {}  # outcomes of this process, by fingerprint


@dataclass(frozen=True)
class Resolved:
    """An entry's architecture as resolved without weights."""

    depth: int  # transformer blocks
    width: int  # d (of layer 0)
    max_tokens: int | None  # vit: tokens per image; text: positions (None: no limit)
    window_n: int | None = None  # windowed attention: layer 0's n (its window's area)
    n_required: bool = False  # no position limit (ALiBi, NoPE): the entry must set n
    class_attention: int | None = None  # CaiT: the first layer with its class token


def check_architecture(entry: ModelEntry) -> Resolved | None:
    """The entry's architecture (None: its config is only on the hub, resolved at job start).

    Raises:
        ConfigError: an architecture the extraction cannot read, or a model that cannot be
            resolved at all.
    """
    files = _local_files(entry)
    if files is None:
        return None
    fingerprint = _fingerprint(entry, files)
    if fingerprint not in _SEEN:
        _SEEN[fingerprint] = _outcome(fingerprint, entry)
    outcome = _SEEN[fingerprint]
    if "problem" in outcome:
        key = outcome["key"].replace(_ENTRY, entry.key, 1)
        raise ConfigError(key, outcome["problem"], outcome["fix"])
    return Resolved(**outcome)


def _outcome(fingerprint: str, entry: ModelEntry) -> dict:
    """The stored outcome of ``fingerprint``, resolved and stored where there is none."""
    stored = _read_cache()
    if fingerprint in stored:
        return stored[fingerprint]
    outcome = _resolve(entry)
    _write_cache({**_read_cache(), fingerprint: outcome})
    return outcome


def _resolve(entry: ModelEntry) -> dict:
    from memcap.extract.registry import architecture

    try:
        arch = architecture(entry, local_only=True)
    except ConfigError as err:  # stored under the entry's placeholder, not its index
        return {
            "key": err.key.replace(entry.key, _ENTRY, 1),
            "problem": err.problem,
            "fix": err.fix,
        }
    except Exception as err:  # noqa: BLE001 - the job would fail here too: say so now
        first = str(err).splitlines()[0] if str(err) else ""
        return {
            "key": f"{_ENTRY}.model",
            "problem": f"cannot resolve '{entry.model}' ({type(err).__name__}: {first})",
            "fix": "check model and model_kwargs (the job builds the architecture the same way)",
        }
    window_n = arch.windows[0].n if arch.windows else None
    resolved = Resolved(
        arch.depth, arch.width, arch.max_tokens, window_n, arch.n_required, arch.class_attention
    )
    return asdict(resolved)


def _local_files(entry: ModelEntry) -> list[Path] | None:
    """The files the entry's architecture is read from (empty: none, e.g. a timm name or a
    config class), or None where only the hub has them."""
    gguf = gguf_location(entry)
    if gguf is not None:
        path = Path(gguf[0]) / gguf[1]
        return [path] if path.is_file() else None
    path = weights_path(entry)
    if path is None and Path(entry.model).expanduser().is_dir():
        path = Path(entry.model).expanduser()
    if path is not None:
        config = path / "config.json" if path.is_dir() else path
        return [config] if config.exists() else []
    if entry.is_architecture or (entry.kind == "vit" and "/" not in entry.model):
        return []  # a config class, or a timm name
    from memcap.extract.sizes import cached_config

    found = cached_config(entry.model)
    return None if found is None else [found]


def _fingerprint(entry: ModelEntry, files: list[Path]) -> str:
    here = Path(__file__).parent
    parts = {
        "entry": [entry.model, entry.kind, entry.weights, entry.gguf_file],
        "kwargs": dict(entry.model_kwargs),
        "remote_code": entry.trust_remote_code,
        "files": [[str(p), p.stat().st_size, p.stat().st_mtime_ns] for p in files],
        "libraries": [_version(name) for name in _LIBRARIES],
        "rules": hashlib.sha256(b"".join((here / f).read_bytes() for f in _RULES)).hexdigest(),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def cache_path() -> Path:
    """Where resolved architectures are kept."""
    root = os.environ.get("MEMCAP_CACHE_DIR")
    if root is None:
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        root = str(Path(base) / "memcap")
    return Path(root) / _CACHE_FILE


def _read_cache() -> dict:
    try:
        return json.loads(cache_path().read_text())
    except (OSError, ValueError):
        return {}


def _write_cache(outcomes: dict) -> None:
    """Write atomically; an unwritable cache only costs the next dry run the resolving."""
    path = cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(outcomes, sort_keys=True))
        partial.replace(path)
    except OSError:
        return
