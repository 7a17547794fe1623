"""Token embeddings (queries and contexts) of real vision, encoder and decoder models.

Modules: ``config`` (typed settings and config checks, torch-free), ``weights`` / ``sizes`` /
``memory`` (weights routes, sizes from files, memory requests; torch-free), ``registry``
(models by family; ``_timm_models`` / ``_hf_models`` behind it), ``onnx_weights`` (ONNX
backbone conversion), ``images`` / ``corpus`` / ``text`` (inputs), ``audit`` (input
duplicates), ``layers`` (truncated forward, random attention), ``store`` (chunked ``.npy``
writing) and ``job`` (one (model, layer) extraction).
Only the torch-free config API is re-exported here, so importing it stays cheap.
"""

from memcap.extract.config import (
    RANDOM_ATTENTION,
    DataConfig,
    ExtractSettings,
    ModelEntry,
    check_extract_config,
    layer_name,
    model_entries,
    model_entry,
    parse_layer,
)

__all__ = [
    "RANDOM_ATTENTION",
    "DataConfig",
    "ExtractSettings",
    "ModelEntry",
    "check_extract_config",
    "layer_name",
    "model_entries",
    "model_entry",
    "parse_layer",
]
