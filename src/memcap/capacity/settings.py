"""The capacity stage's config section and its memory estimate.

No torch import: the Snakefile sizes the certify_real_capacity jobs with this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Resident memory of a certify_real_capacity job besides its arrays: interpreter, torch.
BASE_MB = 700
# Model width assumed when sizing that job where the config does not give d (1024 covers the
# base and large sizes of ViT, BERT and GPT-2); a config class's width in model_kwargs wins.
MAX_D = 1024
_WIDTH_KEYS = ("hidden_size", "n_embd", "d_model", "embed_dim")
# Context size assumed when `n` is null: every token of a ViT at 224 px with 16 px patches (197;
# other inputs: raise mem_mb with --set-resources), or at most 128 text tokens (schema: n).
VIT_FULL_N = 197
TEXT_FULL_N = 128


def certify_memory_mb(section: Mapping[str, Any], model: Mapping[str, Any]) -> int:
    """Memory of one certify_real_capacity job on an extracted model's layer.

    The float32 contexts of the examples it uses, then Z (T × H·d, float64) with the copies of
    its reshape and SVD (four in all).

    Args:
        section: the validated ``capacity`` section.
        model: the model's validated ``extract.models`` entry (its data.T, n and family).
    """
    T = model["data"]["T"]
    if section["max_T"] is not None:
        T = min(T, section["max_T"])
    n = model["n"] or (VIT_FULL_N if model["family"] == "vit" else TEXT_FULL_N)
    kwargs = model.get("model_kwargs") or {}
    d = max([MAX_D] + [int(kwargs[key]) for key in _WIDTH_KEYS if key in kwargs])
    contexts = T * n * d * 4
    features = 4 * T * section["max_H"] * d * 8
    return BASE_MB + (contexts + features) // 2**20
