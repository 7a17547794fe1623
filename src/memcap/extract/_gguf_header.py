"""Metadata and tensor shapes of a GGUF file, read from its header in plain Python.

``gguf.GGUFReader`` parses every field into NumPy views (seconds for a tokenizer of 49k
tokens); the workflow only needs a few numbers at parse time, so it reads the header itself
(format: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md).
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any, BinaryIO

_MAGIC = b"GGUF"
# Value types: fixed-size scalars by struct format; 8 = string, 9 = array.
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q"}
_SCALARS |= {11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


def read_gguf_header(path: str | Path) -> tuple[dict[str, Any], dict[str, tuple[int, ...]]]:
    """(scalar and string metadata, tensor name -> shape) of a GGUF file; arrays skipped.

    Raises:
        ValueError: not a GGUF file.
    """
    with Path(path).open("rb") as handle:
        if handle.read(4) != _MAGIC:
            raise ValueError(f"{path} is not a GGUF file")
        _version, tensors, fields = struct.unpack("<IQQ", handle.read(20))
        metadata: dict[str, Any] = {}
        for _ in range(fields):
            name = _string(handle)
            kind = _unpack(handle, "<I")
            value = _value(handle, kind)
            if kind != _ARRAY:
                metadata[name] = value
        shapes: dict[str, tuple[int, ...]] = {}
        for _ in range(tensors):
            name = _string(handle)
            dims = _unpack(handle, "<I")
            shapes[name] = struct.unpack(f"<{dims}Q", handle.read(8 * dims))
            handle.read(12)  # ggml type (u32) and data offset (u64)
    return metadata, shapes


def _unpack(handle: BinaryIO, fmt: str) -> Any:
    return struct.unpack(fmt, handle.read(struct.calcsize(fmt)))[0]


def _string(handle: BinaryIO) -> str:
    return handle.read(_unpack(handle, "<Q")).decode("utf-8", errors="replace")


def _value(handle: BinaryIO, kind: int) -> Any:
    if kind == _STRING:
        return _string(handle)
    if kind == _ARRAY:
        item, count = _unpack(handle, "<I"), _unpack(handle, "<Q")
        if item in _SCALARS:
            handle.seek(struct.calcsize(_SCALARS[item]) * count, 1)
        else:
            for _ in range(count):
                _value(handle, item)
        return None
    return _unpack(handle, _SCALARS[kind])
