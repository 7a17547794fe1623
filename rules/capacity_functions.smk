"""Functions of the capacity stage's rules: targets, inputs, memory."""

from memcap.capacity.settings import certify_memory_mb


def capacity_models():
    """Models whose detail layers get a certified capacity (depth rows store no contexts)."""
    return [m for m in extract_models() if model_detail_layers(m)]


def capacity_jobs():
    """The stage's job lists (memcap.report.layout.JOB_LISTS), empty when it is off: the
    certified models and their detail (model, layer) pairs."""
    models = capacity_models() if capacity_enabled() else []
    return {
        "capacity_models": [{"model": m} for m in models],
        "capacity": [
            {"model": m, "layer": layer}
            for m in models
            for layer in model_detail_layers(m)
        ],
    }


def capacity_targets():
    """Final outputs of the capacity stage: the merged tables, their figure and each certified
    model's folder (a table and its provenance per detail layer)."""
    if not capacity_enabled():
        return []
    return [
        "results/capacity/real.csv",
        "results/capacity/shared_spread.csv",
        "results/capacity/real.png",
    ] + capacity_folders(None)


def capacity_section(wildcards):
    """The validated capacity config section."""
    return config["capacity"]


def capacity_folders(wildcards):
    """Every certified model's folder, in config order."""
    return [
        "results/capacity/{model}".format(**job)
        for job in capacity_jobs()["capacity_models"]
    ]


def capacity_tables(wildcards):
    """One certified-capacity table per detail layer, in its model's folder."""
    return [
        "results/capacity/{model}/{layer}.csv".format(**job)
        for job in capacity_jobs()["capacity"]
    ]


def capacity_mem_mb(wildcards):
    """Memory of certify_real_capacity on the job's model (one layer at a time)."""
    return certify_memory_mb(config["capacity"], extract_entry(wildcards.model))
