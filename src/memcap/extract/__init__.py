"""Token embeddings (queries and contexts) of real vision, encoder and decoder models.

Modules: ``config`` (the typed settings), ``layer_spec`` (the ``layers`` key), ``entries``
(settings built from the config), ``checks`` (config checks), ``weights`` / ``sizes`` /
``memory`` (weights routes, sizes from files, memory requests), ``positions`` (how a model
encodes positions), ``depth`` (layers of models whose depth needs the architecture built); all
torch-free but ``depth``. Then ``registry`` (models by family; ``families`` says what is read
and what refused; ``_timm_models`` / ``_hf_models`` behind it), ``onnx_weights`` (ONNX
backbone conversion), ``images`` / ``corpus`` / ``text`` (inputs), ``audit`` (input
duplicates), ``layers`` (truncated forward, random attention), ``windows`` (Swin's window
contexts), ``store`` (a layer's files in the model's folder, chunked ``.npy`` writing) and
``job`` (one model's extraction).
Only the torch-free config API is re-exported here, so importing it stays cheap.
"""

from memcap.extract.checks import check_extract_config
from memcap.extract.config import DataConfig, ExtractSettings, ModelEntry
from memcap.extract.entries import model_entries, model_entry
from memcap.extract.layer_spec import RANDOM_ATTENTION, layer_name, parse_layer

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
