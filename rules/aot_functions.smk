"""Functions of the aot stage's rules: targets, params, memory."""

import memcap.aot.settings as aot_settings


def aot_sweeps():
    """The {sweep} wildcard values of the aot stage, in config order."""
    return aot_settings.sweep_names(config["aot"])


def aot_targets():
    """Final outputs of the aot stage: summary, fits and the figures folder (one per sweep)."""
    if not stage_enabled("aot"):
        return []
    return ["results/aot/summary.csv", "results/aot/fits.csv", "results/aot/figures"]


def aot_stage(wildcards):
    """The validated aot settings shared by every sweep (the section without its sweeps)."""
    return {key: value for key, value in config["aot"].items() if key != "sweeps"}


def aot_sweep_spec(wildcards):
    """One validated sweep: editing another sweep does not rerun this one."""
    return config["aot"]["sweeps"][wildcards.sweep]


def aot_sweep_tables(wildcards):
    """One table per configured sweep."""
    return expand("results/aot/{sweep}.csv", sweep=aot_sweeps())


def aot_sweep_mem_mb(wildcards):
    """Memory of a sweep job from its largest batched replica group."""
    return aot_settings.sweep_memory_mb(config["aot"], wildcards.sweep)
