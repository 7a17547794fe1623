"""Functions of the report stage's rule: its inputs are the other stages' targets; the files
the page reads come from the layout table and the stages' job lists (memcap.report.layout).
"""

from memcap.report.layout import (
    JOB_LISTS,
    benchmark_files,
    files_read,
    report_layout,
    unlisted,
)

REPORT_HTML = "reports/report.html"
REPORT_STAGES = (
    "extract",
    "assumptions",
    "synthetic",
    "capacity",
    "real_memorization",
    "aot",
    "report",
)


def report_jobs():
    """Every job list the layout table names, from the stages that run them."""
    jobs = {
        **extract_jobs(),
        **assumptions_jobs(),
        **capacity_jobs(),
        **real_memorization_jobs(),
        **synthetic_jobs(),
        **aot_jobs(),
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
    enabled["real_memorization"] = bool(real_memorization_models())
    captions = Path(workflow.basedir) / "workflow" / "report"
    return report_layout(report_jobs(), enabled, captions)


def report_stage_files(wildcards):
    """The stages' targets: every file the page reads is one of them or lies in one."""
    targets = stage_targets()
    missing = unlisted(files_read(report_layout_param()), targets)
    if missing:
        raise WorkflowError(f"the report reads files no stage target holds: {missing}")
    return targets


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
    stages = {stage: stage_enabled(stage) for stage in REPORT_STAGES}
    return stages | {"real_memorization": bool(real_memorization_models())}
