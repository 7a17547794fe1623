"""Functions of the assumptions stage's rules: targets, the cut's jobs, inputs, params,
requests, the report() flag of a job's folder."""

import memcap.assumptions.cut as assumptions_cut
from memcap.assumptions.memory import check_memory_mb

# A layer's folder: the figures of a detail layer (memcap.report.layout.yaml's `folder`).
LAYER_FOLDER = "results/assumptions/jobs/{model}/{layer}"


def assumptions_jobs():
    """The stage's job lists (memcap.report.layout.JOB_LISTS), empty when it is off: every
    detail (model, layer), the models with a depth profile and the check jobs
    assumptions.cut names."""
    if not stage_enabled("assumptions"):
        return dict.fromkeys(("detail", "depth", "assumption_jobs"), [])
    return {
        "detail": [
            {"model": m, "layer": layer}
            for m in extract_models()
            for layer in model_detail_layers(m)
        ],
        "depth": [{"model": m} for m in depth_models()],
        "assumption_jobs": [{"job": job} for job in assumptions_job_ids()],
    }


def assumptions_job_ids():
    """The check jobs assumptions.cut names: each audited model, or each of its layers."""
    layers = {m: checked_layers(m) for m in audited_models()}
    return assumptions_cut.job_ids(config["assumptions"]["cut"], layers)


def assumptions_job_pattern():
    """Regex of the {job} wildcard: a configured model, then maybe one of its layers."""
    return assumptions_cut.job_pattern(extract_model_pattern())


def job_model(wildcards):
    """The model of the job."""
    return assumptions_cut.parse_job(wildcards.job)[0]


def assumptions_extraction(wildcards):
    """The extraction folder of the job's model."""
    return f"results/extract/{job_model(wildcards)}"


def assumptions_checks_report():
    """The report() flag of a check job's folder: its detail layers' figures, each layer's
    folder at {layer}/ inside a model's job and the folder itself for a layer's job."""
    flag = folder_flag(LAYER_FOLDER)
    inside = "" if config["assumptions"]["cut"] == "layer" else "{layer}/"

    def named(wildcards):
        """A file's wildcards as the layout table names them: its job's model and layer."""
        named = dict(wildcards.items())
        model, layer = assumptions_cut.parse_job(named.pop("job"))
        return named | {"model": model} | ({"layer": layer} if layer else {})

    return report(
        directory("results/assumptions/jobs/{job}"),
        patterns=[inside + pattern for pattern in flag["patterns"]],
        caption=f"{REPORT_CAPTIONS}{flag['caption']}",
        category=flag["category"],
        subcategory=lambda wildcards: flag["subcategory"].format(**named(wildcards)),
        labels=lambda wildcards: figure_labels(LAYER_FOLDER, named(wildcards)),
    )


def assumptions_outputs(pattern, jobs="detail"):
    """``pattern`` filled in for each job of one of the stage's lists, in config order."""
    return [pattern.format(**job) for job in assumptions_jobs()[jobs]]


def assumptions_targets():
    """Final outputs of the assumptions stage: the summary table, each depth-profiled model's
    depth profile and every check job's folder (its layers' checks and figures)."""
    if not stage_enabled("assumptions"):
        return []
    return (
        ["results/assumptions/summary.csv"]
        + [f for name in DEPTH_FILES for f in assumptions_depth_files(name)]
        + assumptions_job_folders(None)
    )


def checked_layers(model):
    """The layers the checks read for ``model``: detail layers, then depth rows."""
    return model_detail_layers(model) + model_depth_rows(model)


def job_layers_param(wildcards):
    """The job's layers, in depth order."""
    model = job_model(wildcards)
    return assumptions_cut.job_layers(wildcards.job, checked_layers(model))


def job_detail_layers_param(wildcards):
    """The detail layers of the job's model (checked in full, their contexts read)."""
    return model_detail_layers(job_model(wildcards))


def assumptions_settings(wildcards=None):
    """The validated assumptions section, with the seed resolved."""
    section = dict(config["assumptions"])
    if section.get("seed") is None:
        section["seed"] = config["seed"]
    return section


def assumptions_mem_mb(wildcards):
    """Memory request of one job's checks (one layer at a time), from its model's T."""
    return check_memory_mb(
        extract_entry(job_model(wildcards))["data"]["T"],
        config["assumptions"]["context_chunk"],
    )


def assumptions_job_folders(wildcards):
    """Every check job's folder, in config order."""
    return [f"results/assumptions/jobs/{job}" for job in assumptions_job_ids()]


def assumptions_kruskal_jsons(wildcards):
    """Every detail (model, layer) Kruskal summary, in config order."""
    return assumptions_outputs(f"{LAYER_FOLDER}/kruskal.json")


def assumptions_context_jsons(wildcards):
    """Every detail (model, layer) context-rank summary, in config order."""
    return assumptions_outputs(f"{LAYER_FOLDER}/context_rank.json")


# The depth profile of a model, written by summarize_assumptions from its layers' folders.
DEPTH_FILES = ("depth.csv", "depth_profiles.csv", "depth.png")


def assumptions_depth_files(name):
    """The file ``name`` of every depth-profiled model's depth profile, in config order."""
    return [f"results/assumptions/{m}/{name}" for m in depth_models()]


def assumptions_depth_figures():
    """Every depth-profiled model's depth figure, each flagged for the report."""
    return [figure_report("depth_profile", model=m) for m in depth_models()]


def assumptions_depth_models(wildcards):
    """The depth-profiled models, in the order of the depth outputs."""
    return depth_models()


def assumptions_depth_layers(wildcards):
    """Per depth-profiled model, its checked layers' folders in depth order."""
    return [
        [LAYER_FOLDER.format(model=m, layer=layer) for layer in checked_layers(m)]
        for m in depth_models()
    ]
