"""Functions of the aot stage's rules: targets, params, memory."""

import memcap.aot.settings as aot_settings


def aot_sweeps():
    """The {sweep} wildcard values of the aot stage, in config order."""
    return aot_settings.sweep_names(config["aot"])


def aot_jobs():
    """The stage's job list (memcap.report.layout.JOB_LISTS): its sweeps, none when it is off."""
    sweeps = aot_sweeps() if stage_enabled("aot") else []
    return {"aot": [{"sweep": s} for s in sweeps]}


def aot_targets():
    """Final outputs of the aot stage: summary, fits, laws, the figures folder (one per sweep)
    and each sweep's provenance."""
    if not stage_enabled("aot"):
        return []
    sweeps = [job["sweep"] for job in aot_jobs()["aot"]]
    tables = ["results/aot/summary.csv", "results/aot/fits.csv", "results/aot/laws.csv"]
    return (
        tables
        + ["results/aot/figures"]
        + expand("results/aot/{sweep}_provenance.json", sweep=sweeps)
    )


def aot_stage(wildcards):
    """The validated aot settings shared by every sweep (the section without its sweeps)."""
    return {key: value for key, value in config["aot"].items() if key != "sweeps"}


def aot_sweep_specs(wildcards):
    """Every validated sweep by name, in config order."""
    return {sweep: config["aot"]["sweeps"][sweep] for sweep in aot_sweeps()}


def aot_sweep_tables(wildcards):
    """One table per configured sweep."""
    return expand("results/aot/{sweep}.csv", sweep=aot_sweeps())


def aot_mem_mb(wildcards):
    """Memory of the aot job: its largest batched replica group (sweeps run one by one)."""
    return max(
        (aot_settings.sweep_memory_mb(config["aot"], sweep) for sweep in aot_sweeps()),
        default=1000,
    )
