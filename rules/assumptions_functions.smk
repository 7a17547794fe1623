"""Functions of the assumptions stage's rules: targets, inputs, params, memory."""

from memcap.assumptions.memory import check_memory_mb

# What check_assumptions leaves per detail layer under results/assumptions/{model}/{layer}/.
LAYER_CHECK_FILES = (
    "context_rank.csv",
    "context_rank.json",
    "context_rank.png",
    "kruskal_profile.csv",
    "kruskal.json",
    "kruskal_profile.png",
    "failures.csv",
)


def assumptions_outputs(pattern):
    """``pattern`` expanded over every detail (model, layer) pair, in config order."""
    return [
        pattern.format(model=name, layer=layer)
        for name in extract_models()
        for layer in model_detail_layers(name)
    ]


def assumptions_depth_outputs(pattern):
    """``pattern`` expanded over every model with a depth profile."""
    return [pattern.format(model=name) for name in depth_models()]


def assumptions_targets():
    """Final outputs of the assumptions stage: summary table, per detail layer checks and
    figures, per model depth profiles."""
    if not stage_enabled("assumptions"):
        return []
    return (
        ["results/assumptions/summary.csv"]
        + [
            path
            for name in LAYER_CHECK_FILES
            for path in assumptions_outputs(
                f"results/assumptions/{{model}}/{{layer}}/{name}"
            )
        ]
        + assumptions_depth_outputs("results/assumptions/{model}/depth_profiles.csv")
        + assumptions_depth_outputs("results/assumptions/{model}/depth.png")
    )


def checked_layers(model):
    """The layers check_assumptions reads for ``model``: detail layers, then depth rows."""
    return model_detail_layers(model) + model_depth_rows(model)


def checked_layers_param(wildcards):
    """The job's layers, in the order of its inputs."""
    return checked_layers(wildcards.model)


def depth_profile_param(wildcards):
    """Whether the job's model gets a depth profile (depth.csv, depth.png)."""
    return wildcards.model in depth_models()


def assumptions_settings(wildcards=None):
    """The validated assumptions section, with the seed resolved."""
    section = dict(config["assumptions"])
    if section.get("seed") is None:
        section["seed"] = config["seed"]
    return section


def assumptions_mem_mb(wildcards):
    """Memory request of one model's checks (one layer at a time), from its T."""
    return check_memory_mb(
        extract_entry(wildcards.model)["data"]["T"],
        config["assumptions"]["context_chunk"],
    )


def assumptions_kruskal_jsons(wildcards):
    """Every (model, layer) Kruskal summary, in config order."""
    return assumptions_outputs("results/assumptions/{model}/{layer}/kruskal.json")


def assumptions_context_jsons(wildcards):
    """Every (model, layer) context-rank summary, in config order."""
    return assumptions_outputs("results/assumptions/{model}/{layer}/context_rank.json")


def assumptions_depth_tables(wildcards):
    """Every model's depth table (its depth rows' summaries), in config order."""
    return assumptions_depth_outputs("results/assumptions/{model}/depth.csv")
