"""Functions of the extract stage's rules: targets, params, memory requests."""

from memcap.extract.memory import extract_memory_mb, convert_memory_mb
from memcap.extract.weights import weights_path, weights_route


def extract_jobs():
    """The stage's job lists (memcap.report.layout.JOB_LISTS), empty when it is off: its
    models, those converted from ONNX first, and every (model, layer) they extract."""
    models = extract_models() if stage_enabled("extract") else []
    return {
        "models": [{"model": m} for m in models],
        "onnx_models": [{"model": m} for m in models if m in onnx_models()],
        "layers": [
            {"model": m, "layer": layer} for m in models for layer in model_layers(m)
        ],
    }


def extract_targets():
    """Final outputs of the extract stage: each model's folder, one subfolder per layer."""
    return [f"results/extract/{job['model']}" for job in extract_jobs()["models"]]


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
