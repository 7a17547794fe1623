"""Functions of the capacity stage's rules: targets, inputs, memory."""

from memcap.capacity.settings import certify_memory_mb


def capacity_models():
    """Models whose detail layers get a certified capacity (depth rows store no contexts)."""
    return [m for m in extract_models() if model_detail_layers(m)]


def capacity_targets():
    """Final outputs of the capacity stage: the merged table and its figure."""
    if not capacity_enabled():
        return []
    return [
        "results/capacity/real.csv",
        "results/capacity/shared_spread.csv",
        "results/capacity/real.png",
    ]


def capacity_section(wildcards):
    """The validated capacity config section."""
    return config["capacity"]


def capacity_tables(wildcards):
    """One certified-capacity table per detail layer."""
    return [
        f"results/capacity/{model}/{layer}.csv"
        for model in capacity_models()
        for layer in model_detail_layers(model)
    ]


def capacity_mem_mb(wildcards):
    """Memory of certify_real_capacity on the job's model (one layer at a time)."""
    return certify_memory_mb(config["capacity"], extract_entry(wildcards.model))
