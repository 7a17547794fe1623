"""Functions of the synthetic stage's rules: targets, the cut, params, requests."""

import memcap.synthetic.cut as synthetic_cut
import memcap.synthetic.groups as synthetic_groups
import memcap.synthetic.settings as synthetic_settings


def synthetic_sweeps():
    """The {sweep} wildcard values the config switches on."""
    return synthetic_settings.sweep_names(config["synthetic"])


def synthetic_sweep_pattern(cut):
    """Regex of the {sweep} wildcard of the rules of ``cut``: every sweep under the configured
    cut, none under the other (so each sweep's tables have one rule)."""
    if config["synthetic"]["cut"] != cut:
        return "(?!)"
    return "|".join(synthetic_settings.SWEEPS)


def synthetic_setting_pattern():
    """Regex of the {setting} wildcard ("H5_shared")."""
    return synthetic_cut.setting_pattern()


def synthetic_spec(sweep):
    """The SweepSpec of ``sweep``."""
    return synthetic_settings.sweep_spec(config["synthetic"], sweep)


def synthetic_setting_ids(sweep):
    """The {setting} values of ``sweep``, in the order of its table's rows."""
    return synthetic_cut.setting_ids(synthetic_spec(sweep))


def synthetic_figures():
    """One figure per enabled sweep, each flagged for the report."""
    return [figure_report("synthetic_memorized", sweep=s) for s in synthetic_sweeps()]


def synthetic_jobs():
    """The stage's job lists (memcap.report.layout.JOB_LISTS), empty when it is off: its
    sweeps, and the training jobs of the configured cut (the other cut's list is empty).
    """
    sweeps = synthetic_sweeps() if stage_enabled("synthetic") else []
    cut = config["synthetic"]["cut"]
    return {
        "synthetic": [{"sweep": s} for s in sweeps],
        "synthetic_sweep_jobs": [{"sweep": s} for s in sweeps if cut == "sweep"],
        "synthetic_setting_jobs": [
            {"sweep": s, "setting": setting}
            for s in sweeps
            if cut == "setting"
            for setting in synthetic_setting_ids(s)
        ],
    }


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


def synthetic_setting_files(suffix):
    """Input function: the files ending in ``suffix`` of every setting job of a sweep."""

    def files(wildcards):
        return [
            f"results/synthetic/{wildcards.sweep}/{setting}{suffix}"
            for setting in synthetic_setting_ids(wildcards.sweep)
        ]

    return files


def synthetic_settings_param(wildcards):
    """The sweep's setting ids, in the order of its table's rows."""
    return synthetic_setting_ids(wildcards.sweep)


def synthetic_job_spec(wildcards):
    """What one training job trains: its sweep, or one setting of it."""
    spec = synthetic_spec(wildcards.sweep)
    setting = wildcards.get("setting")
    return spec if setting is None else synthetic_cut.setting_spec(spec, setting)


def synthetic_mem_mb(wildcards):
    """Memory of a training job: its largest batched model's data and activations."""
    return synthetic_groups.spec_memory_mb(
        config["synthetic"], config["engine"], synthetic_job_spec(wildcards)
    )
