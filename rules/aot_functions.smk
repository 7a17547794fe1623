"""Functions of the aot stage's rules: targets, the cut's jobs, params, requests."""

import memcap.aot.cut as aot_cut
import memcap.aot.settings as aot_settings


def aot_sweeps():
    """The sweeps of the aot stage, in config order."""
    return aot_settings.sweep_names(config["aot"])


def aot_job_pattern():
    """Regex of the {job} wildcard: the stage's one job, a sweep, or a sweep's setting."""
    return aot_cut.job_pattern(aot_sweeps())


def aot_job_ids():
    """The training jobs aot.cut names, in the order of the sweeps' table rows."""
    return aot_cut.job_ids(config["aot"])


def aot_jobs():
    """The stage's job lists (memcap.report.layout.JOB_LISTS), empty when it is off: its
    sweeps, and the training jobs aot.cut names."""
    if not stage_enabled("aot"):
        return {"aot": [], "aot_jobs": []}
    return {
        "aot": [{"sweep": s} for s in aot_sweeps()],
        "aot_jobs": [{"job": job} for job in aot_job_ids()],
    }


def aot_targets():
    """Final outputs of the aot stage: summary, fits, laws, the figures folder (one per sweep)
    and each training job's provenance."""
    if not stage_enabled("aot"):
        return []
    jobs = [job["job"] for job in aot_jobs()["aot_jobs"]]
    tables = ["results/aot/summary.csv", "results/aot/fits.csv", "results/aot/laws.csv"]
    return (
        tables
        + ["results/aot/figures"]
        + expand("results/aot/jobs/{job}_provenance.json", job=jobs)
    )


def aot_stage(wildcards):
    """The validated aot settings shared by every sweep (the section without its sweeps)."""
    return {key: value for key, value in config["aot"].items() if key != "sweeps"}


def aot_job_sweeps(wildcards):
    """The sweeps the job trains: every sweep for the stage's one job, else its own."""
    return aot_cut.job_sweeps(config["aot"]["cut"], wildcards.job, aot_sweeps())


def aot_job_specs(wildcards):
    """Every validated sweep of the job by name, in config order."""
    return {
        sweep: config["aot"]["sweeps"][sweep] for sweep in aot_job_sweeps(wildcards)
    }


def aot_job_tables(wildcards):
    """Every training job's table, in the order of the sweeps' table rows."""
    return [f"results/aot/jobs/{job}.csv" for job in aot_job_ids()]


def aot_mem_mb(wildcards):
    """Memory of a training job: its sweeps' largest batched replica group (one at a time)."""
    return max(
        (
            aot_settings.sweep_memory_mb(config["aot"], s)
            for s in aot_job_sweeps(wildcards)
        ),
        default=1000,
    )
