"""Functions of the extract stage's rules: targets, params, memory requests."""

from memcap.extract.memory import extract_memory_mb, convert_memory_mb
from memcap.extract.weights import weights_path, weights_route

# What extraction writes under results/extract/{model}/{layer}/ for every layer; the detail
# layers add contexts.npy (extract_contexts), depth rows do not store their contexts.
EXTRACT_FILES = ("queries.npy", "provenance.json", "context_ranks.npz")


def extract_targets():
    """Final outputs of the extract stage: three files per (model, layer), and the contexts
    of every detail layer."""
    if not stage_enabled("extract"):
        return []
    return [
        f"results/extract/{name}/{layer}/{filename}"
        for name in extract_models()
        for layer in model_layers(name)
        for filename in EXTRACT_FILES
    ] + [
        f"results/extract/{name}/{layer}/contexts.npy"
        for name in extract_models()
        for layer in model_detail_layers(name)
    ]


def extract_entry_param(wildcards):
    """Config entry of the job's model."""
    return extract_entry(wildcards.model)


def extract_index_param(wildcards):
    """Position of the job's model in extract.models, for error messages."""
    return extract_models().index(wildcards.model)


def onnx_models():
    """Models whose weights are an ONNX graph to convert first."""
    return [m for m in extract_models() if weights_route(typed_entry(m)) == "onnx"]


def onnx_graph_input(wildcards):
    """The ONNX graph whose backbone the model's weights are converted from."""
    return str(weights_path(typed_entry(wildcards.model)))


def converted_checkpoint_input(wildcards):
    """The converted checkpoint of a model with ONNX weights; nothing for other models."""
    if weights_route(typed_entry(wildcards.model)) != "onnx":
        return []
    return f"results/weights/{wildcards.model}/model.safetensors"


def extract_layers_param(wildcards):
    """Every requested layer of the model, extracted in one pass."""
    return model_layers(wildcards.model)


def extract_detail_param(wildcards):
    """The model's detail layers: the only ones whose contexts the pass stores."""
    return model_detail_layers(wildcards.model)


def extract_mem_mb(wildcards):
    """Memory request: base, the model's parameters (known from its files where possible, at
    its precision) and the activations of one batch with every kept layer (not T x n x d).
    """
    return extract_memory_mb(
        typed_entry(wildcards.model),
        config["extract"]["batch_size"],
        len(model_layers(wildcards.model)),
    )


def convert_mem_mb(wildcards):
    """Memory of an ONNX conversion: the graph, its arrays and the timm model."""
    return convert_memory_mb(typed_entry(wildcards.model))
