"""Functions of the assumptions stage's rules: targets, inputs, params, memory."""

from memcap.assumptions.memory import check_memory_mb


def assumptions_jobs():
    """The stage's job lists (memcap.report.layout.JOB_LISTS), empty when it is off: every
    detail (model, layer), the models with a depth profile and the models checked."""
    if not stage_enabled("assumptions"):
        return {"detail": [], "depth": [], "assumption_models": []}
    return {
        "detail": [
            {"model": m, "layer": layer}
            for m in extract_models()
            for layer in model_detail_layers(m)
        ],
        "depth": [{"model": m} for m in depth_models()],
        "assumption_models": [{"model": m} for m in audited_models()],
    }


def assumptions_outputs(pattern, jobs="detail"):
    """``pattern`` filled in for each job of one of the stage's lists, in config order."""
    return [pattern.format(**job) for job in assumptions_jobs()[jobs]]


def assumptions_targets():
    """Final outputs of the assumptions stage: the summary table and each checked model's
    folder (its detail layers' checks and figures, its depth profile)."""
    if not stage_enabled("assumptions"):
        return []
    return ["results/assumptions/summary.csv"] + assumptions_folders(None)


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


def assumptions_folders(wildcards):
    """Every checked model's folder, in config order."""
    return assumptions_outputs("results/assumptions/{model}", "assumption_models")


def assumptions_kruskal_jsons(wildcards):
    """Every detail (model, layer) Kruskal summary, in config order."""
    return assumptions_outputs("results/assumptions/{model}/{layer}/kruskal.json")


def assumptions_context_jsons(wildcards):
    """Every detail (model, layer) context-rank summary, in config order."""
    return assumptions_outputs("results/assumptions/{model}/{layer}/context_rank.json")


def assumptions_depth_tables(wildcards):
    """Every model's depth table (its depth rows' summaries), in config order."""
    return assumptions_outputs("results/assumptions/{model}/depth.csv", "depth")
