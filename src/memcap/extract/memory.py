"""Memory requests of extraction jobs, sized from the model's parameter count (torch-free).

Measured on the default models (docs/models.md): the interpreter with torch, transformers and
the data takes about 1.2 GB; a model holds its parameters once at its precision, plus a
transient float32 copy while the weights load (GGUF dequantization, safetensors reads);
activations of a base-size model take about 20 MB per example of a batch, and each layer a
one-pass job keeps until the batch is written about 1 MB per example (197 x 768 float32).
After the pass, the forward-error measurement holds a float64 copy of the model
(:mod:`memcap.extract.forward_error`), which outweighs the loading copy.
"""

from __future__ import annotations

from memcap.extract.config import ModelEntry
from memcap.extract.sizes import known_sizes
from memcap.extract.weights import weights_path

BASE_MB = 1200  # interpreter, torch, transformers / timm, data
MB_PER_EXAMPLE = 20  # activations of one example of a base-size model (n <= 512)
MB_PER_KEPT_LAYER = 1  # one example's hidden states at one extracted layer (base size)
DEFAULT_PARAMETERS = 125_000_000  # when no file gives the count: a base-size model
BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
LOAD_FLOAT32_COPIES = 1  # the float32 copy that exists while weights load
FLOAT64_BYTES = 8  # the forward-error pass's float64 copy (after loading: not at once)
CONVERT_COPIES = 3  # ONNX graph, its NumPy arrays, the timm model and its state dict


def parameter_estimate(entry: ModelEntry) -> int:
    """Parameter count from the model's files (config.json, GGUF / safetensors header), else
    a base-size default."""
    return known_sizes(entry).parameters or DEFAULT_PARAMETERS


def extract_memory_mb(entry: ModelEntry, batch_size: int, layers: int = 1) -> int:
    """Memory request (MB) of one extraction job of the entry, extracting ``layers`` layers."""
    parameters = parameter_estimate(entry)
    held = parameters * BYTES[entry.precision]
    loading = parameters * max(4 * LOAD_FLOAT32_COPIES, FLOAT64_BYTES)
    activations = (MB_PER_EXAMPLE + MB_PER_KEPT_LAYER * layers) * batch_size
    return BASE_MB + (held + loading) // 2**20 + activations


def convert_memory_mb(entry: ModelEntry) -> int:
    """Memory request (MB) of converting the entry's ONNX graph to a checkpoint."""
    path = weights_path(entry)
    size = path.stat().st_size if path is not None and path.is_file() else 0
    return BASE_MB + CONVERT_COPIES * size // 2**20
