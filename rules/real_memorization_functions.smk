"""Functions of the real-memorization stage's rules: its models, layers and targets."""

from memcap.real_memorization.settings import enabled as real_memorization_enabled
from memcap.cluster.costs import model_sizes
from memcap.real_memorization.settings import layers_of, memory_mb
from memcap.real_memorization.settings import models as real_models


def real_memorization_models():
    """Models with a layer to train on (none when the stage is off), each layer checked to be
    one of the model's detail layers (whose contexts extraction stores)."""
    if not real_memorization_enabled(config):
        return []
    section = config["real_memorization"]
    for model in real_models(section):
        detail = model_detail_layers(model)
        for layer in layers_of(section, model):
            if str(layer) not in detail:
                raise WorkflowError(
                    f"real_memorization.layers: layer {layer!r} of {model} is not one of its "
                    f"detail layers {detail}; add it to extract.models[{model}].detail_layers "
                    "or pick one of those"
                )
    return real_models(section)


def real_memorization_jobs():
    """The stage's job list (memcap.report.layout.JOB_LISTS): one job a model."""
    return {
        "real_memorization_models": [{"model": m} for m in real_memorization_models()]
    }


def real_memorization_model_pattern():
    """Regex of the stage's {model} wildcard: exactly its models."""
    return "|".join(re.escape(m) for m in real_memorization_models()) or "(?!)"


def real_memorization_layers_param(wildcards):
    """The job's model's layers, as layer wildcard values."""
    return [
        str(layer) for layer in layers_of(config["real_memorization"], wildcards.model)
    ]


def real_memorization_mem_mb(wildcards):
    """Memory of the model's job (memcap.real_memorization.settings.memory_mb)."""
    sizes = model_sizes(typed_entry(wildcards.model))
    return memory_mb(config["real_memorization"], *sizes)


def real_memorization_folders(wildcards=None):
    """Every model's folder, in config order."""
    return [f"results/real_memorization/{m}" for m in real_memorization_models()]


def real_memorization_layer_lists(wildcards):
    """Each folder's layers, in the order of real_memorization_folders."""
    section = config["real_memorization"]
    return [
        [str(la) for la in layers_of(section, m)] for m in real_memorization_models()
    ]


def real_memorization_targets():
    """Final outputs of the stage: the merged tables, the figures and every model's folder."""
    if not real_memorization_models():
        return []
    return [
        "results/real_memorization/capacity.csv",
        "results/real_memorization/estimates.csv",
        "results/real_memorization/laws.csv",
        "results/real_memorization/paired.csv",
        "results/real_memorization/figures",
    ] + real_memorization_folders()
