"""Functions of the synthetic stage's rules: targets, the cut's jobs, params, requests."""

import memcap.synthetic.cut as synthetic_cut
import memcap.synthetic.settings as synthetic_settings


def synthetic_sweeps():
    """The enabled sweeps, in canonical order."""
    return synthetic_settings.sweep_names(config["synthetic"])


def synthetic_job_pattern():
    """Regex of the {job} wildcard: a sweep, or a sweep and one of its settings."""
    return synthetic_cut.job_pattern()


def synthetic_figures():
    """One figure per enabled sweep, each flagged for the report."""
    return [figure_report("synthetic_memorized", sweep=s) for s in synthetic_sweeps()]


def synthetic_jobs():
    """The stage's job lists (memcap.report.layout.JOB_LISTS), empty when it is off: its
    sweeps, and the training jobs synthetic.cut names, in the order of their rows."""
    if not stage_enabled("synthetic"):
        return {"synthetic": [], "synthetic_jobs": []}
    return {
        "synthetic": [{"sweep": s} for s in synthetic_sweeps()],
        "synthetic_jobs": [
            {"job": job} for job in synthetic_cut.job_ids(config["synthetic"])
        ],
    }


def synthetic_targets():
    """Final outputs of the synthetic stage: the merged tables, the figures and each training
    job's provenance."""
    if not stage_enabled("synthetic"):
        return []
    jobs = synthetic_jobs()
    sweeps = [job["sweep"] for job in jobs["synthetic"]]
    tables = ("summary", "capacity", "estimates", "fits", "laws", "saturation")
    return (
        [f"results/synthetic/{name}.csv" for name in tables]
        + ["results/synthetic/saturation.png"]
        + expand("results/synthetic/memorized_{sweep}.png", sweep=sweeps)
        + synthetic_job_files("_provenance.json")(None)
    )


def synthetic_section(wildcards):
    """The validated synthetic config section."""
    return config["synthetic"]


def synthetic_sweeps_param(wildcards):
    """The enabled sweeps, in the order of the figures."""
    return synthetic_sweeps()


def synthetic_job_files(suffix):
    """Input function: the files ending in ``suffix`` of every training job, in the order of
    the sweeps' table rows."""

    def files(wildcards):
        return [
            f"results/synthetic/jobs/{job}{suffix}"
            for job in synthetic_cut.job_ids(config["synthetic"])
        ]

    return files


def synthetic_mem_mb(wildcards):
    """Memory of a training job: its largest batched model's data and activations."""
    return synthetic_settings.spec_memory_mb(
        config["synthetic"],
        config["engine"],
        synthetic_cut.job_spec(config["synthetic"], wildcards.job),
    )
