"""Functions of the synthetic stage's rules: targets, params, memory."""

import memcap.synthetic.groups as synthetic_groups
import memcap.synthetic.settings as synthetic_settings


def synthetic_sweeps():
    """The {sweep} wildcard values the config switches on."""
    return synthetic_settings.sweep_names(config["synthetic"])


def synthetic_sweep_pattern():
    """Regex of the {sweep} wildcard of the synthetic stage."""
    return "|".join(synthetic_settings.SWEEPS)


def synthetic_figures():
    """One figure per enabled sweep, each flagged for the report."""
    return [figure_report("synthetic_memorized", sweep=s) for s in synthetic_sweeps()]


def synthetic_jobs():
    """The stage's job list (memcap.report.layout.JOB_LISTS): its sweeps, none when it is off."""
    sweeps = synthetic_sweeps() if stage_enabled("synthetic") else []
    return {"synthetic": [{"sweep": s} for s in sweeps]}


def synthetic_targets():
    """Final outputs of the synthetic stage: the merged tables, the figures and each sweep's
    provenance."""
    if not stage_enabled("synthetic"):
        return []
    sweeps = [job["sweep"] for job in synthetic_jobs()["synthetic"]]
    tables = ("summary", "capacity", "estimates", "fits", "laws", "saturation")
    return (
        [f"results/synthetic/{name}.csv" for name in tables]
        + ["results/synthetic/saturation.png"]
        + expand("results/synthetic/memorized_{sweep}.png", sweep=sweeps)
        + expand("results/synthetic/{sweep}_provenance.json", sweep=sweeps)
    )


def synthetic_section(wildcards):
    """The validated synthetic config section."""
    return config["synthetic"]


def synthetic_sweeps_param(wildcards):
    """The enabled sweeps, in the order of the figures."""
    return synthetic_sweeps()


def synthetic_sweep_tables(wildcards):
    """One result table per enabled sweep."""
    return expand("results/synthetic/{sweep}.csv", sweep=synthetic_sweeps())


def synthetic_saturation_tables(wildcards):
    """One saturation table per enabled sweep."""
    return expand("results/synthetic/{sweep}_saturation.csv", sweep=synthetic_sweeps())


def synthetic_sweep_mem_mb(wildcards):
    """Memory of a sweep job: its largest batched model's data and activations."""
    return synthetic_groups.sweep_memory_mb(
        config["synthetic"], config["engine"], wildcards.sweep
    )
