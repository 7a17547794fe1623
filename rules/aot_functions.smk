"""Functions of the aot stage's rules: targets, the cut, params, requests."""

import memcap.aot.cut as aot_cut
import memcap.aot.settings as aot_settings


def aot_sweeps():
    """The {sweep} wildcard values of the aot stage, in config order."""
    return aot_settings.sweep_names(config["aot"])


def aot_cut_sweeps(cut):
    """The sweeps trained under ``cut``: every sweep under the configured cut, none
    under another (so each sweep's table has one rule)."""
    return aot_sweeps() if config["aot"]["cut"] == cut else []


def aot_sweep_pattern(cut):
    """Regex of the {sweep} wildcard of the rules of ``cut`` (nothing under another cut)."""
    return "|".join(re.escape(s) for s in aot_cut_sweeps(cut)) or "(?!)"


def aot_setting_pattern():
    """Regex of the {setting} wildcard ("aot_H6", "mlp_d7_w84")."""
    return aot_cut.setting_pattern()


def aot_setting_ids(sweep):
    """The {setting} values of ``sweep``, in the order of its table's rows."""
    return list(aot_cut.sweep_settings(sweep, config["aot"]["sweeps"][sweep]))


def aot_jobs():
    """The stage's job lists (memcap.report.layout.JOB_LISTS), empty when it is off: its
    sweeps, and the training jobs of the configured cut (the other cuts' lists are empty).
    """
    enabled = stage_enabled("aot")
    sweeps = aot_sweeps() if enabled else []
    return {
        "aot": [{"sweep": s} for s in sweeps],
        "aot_stage_jobs": [{"sweep": s} for s in aot_cut_sweeps("stage") if enabled],
        "aot_sweep_jobs": [{"sweep": s} for s in aot_cut_sweeps("sweep") if enabled],
        "aot_setting_jobs": [
            {"sweep": s, "setting": setting}
            for s in aot_cut_sweeps("setting")
            if enabled
            for setting in aot_setting_ids(s)
        ],
    }


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


def aot_job_sweeps(wildcards):
    """The sweeps one training job trains: its {sweep}, or every sweep (aot.cut: stage)."""
    sweep = wildcards.get("sweep")
    return aot_sweeps() if sweep is None else [sweep]


def aot_sweep_specs(wildcards):
    """Every validated sweep of the job by name, in config order."""
    return {
        sweep: config["aot"]["sweeps"][sweep] for sweep in aot_job_sweeps(wildcards)
    }


def aot_sweep_tables(wildcards):
    """One table per configured sweep."""
    return expand("results/aot/{sweep}.csv", sweep=aot_sweeps())


def aot_setting_files(suffix):
    """Input function: the files ending in ``suffix`` of every setting job of a sweep."""

    def files(wildcards):
        return [
            f"results/aot/{wildcards.sweep}/{setting}{suffix}"
            for setting in aot_setting_ids(wildcards.sweep)
        ]

    return files


def aot_settings_param(wildcards):
    """The sweep's setting ids, in the order of its table's rows."""
    return aot_setting_ids(wildcards.sweep)


def aot_mem_mb(wildcards):
    """Memory of a training job: its sweeps' largest batched replica group (one at a time)."""
    return max(
        (
            aot_settings.sweep_memory_mb(config["aot"], s)
            for s in aot_job_sweeps(wildcards)
        ),
        default=1000,
    )
