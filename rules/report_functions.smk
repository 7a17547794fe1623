"""Functions of the report stage's rule: the page's files from the layout table and the jobs
the config asks for (memcap.report.layout)."""

from memcap.report.layout import JOB_LISTS, benchmark_files, files_read, report_layout

REPORT_HTML = "reports/report.html"
REPORT_STAGES = ("extract", "assumptions", "synthetic", "capacity", "aot", "report")


def report_jobs():
    """Every job list the layout table names, each empty when its stage is off."""
    extract, assumptions = stage_enabled("extract"), stage_enabled("assumptions")
    capacity = capacity_enabled()
    models = extract_models() if extract else []
    jobs = {
        "layers": [
            {"model": m, "layer": layer} for m in models for layer in model_layers(m)
        ],
        "detail": [
            {"model": m, "layer": layer}
            for m in (models if assumptions else [])
            for layer in model_detail_layers(m)
        ],
        "depth": [{"model": m} for m in depth_models()] if assumptions else [],
        "models": [{"model": m} for m in models],
        "onnx_models": [{"model": m} for m in onnx_models()] if extract else [],
        "assumption_models": (
            [{"model": m} for m in audited_models()] if assumptions else []
        ),
        "capacity_models": (
            [{"model": m} for m in capacity_models()] if capacity else []
        ),
        "capacity": [
            {"model": m, "layer": layer}
            for m in (capacity_models() if capacity else [])
            for layer in model_detail_layers(m)
        ],
        "synthetic": (
            [{"sweep": s} for s in synthetic_sweeps()]
            if stage_enabled("synthetic")
            else []
        ),
        "aot": [{"sweep": s} for s in aot_sweeps()] if stage_enabled("aot") else [],
    }
    assert set(jobs) == set(JOB_LISTS)
    return jobs


def report_targets():
    """Final output of the report stage: the self-contained page."""
    return [REPORT_HTML] if stage_enabled("report") else []


def report_layout_param(wildcards=None):
    """Every file the page reads, by name, computed from the config (JSON-able)."""
    enabled = {stage: stage_enabled(stage) for stage in REPORT_STAGES}
    enabled["capacity"] = capacity_enabled()
    captions = Path(workflow.basedir) / "workflow" / "report"
    return report_layout(report_jobs(), enabled, captions)


def report_stage_files(wildcards):
    """The stage outputs the page reads (tables, figures, provenance), for the rule's inputs."""
    return files_read(report_layout_param())


def report_benchmarks(wildcards):
    """Benchmark files of every compute job upstream of the page."""
    return sorted(
        {f for files in benchmark_files(report_jobs()).values() for f in files}
    )


def report_caption_files(wildcards):
    """Caption files of the page's figures (inputs, so editing one rebuilds the page)."""
    return sorted(
        {
            workflow.source_path(f"{REPORT_CAPTIONS}{entry['caption']}")
            for entry in layout_table()["figures"].values()
        }
    )


def report_stages(wildcards):
    """Which stages the config switches on."""
    return {stage: stage_enabled(stage) for stage in REPORT_STAGES}
