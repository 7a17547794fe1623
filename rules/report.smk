"""Report stage: one self-contained HTML page from every enabled stage's outputs.

Its inputs are the other stages' final outputs (stage_targets, rules/common.smk) and their
jobs' benchmark files; every file the page reads is named from the layout table
(src/memcap/report/layout.yaml) and the stages' job lists (<stage>_jobs), never found by
walking rules or paths, and lies in one of those targets. Functions:
rules/report_functions.smk.
"""


include: "report_functions.smk"


rule render_report:
    input:
        stages=report_stage_files,
        benchmarks=report_benchmarks,
        template=workflow.source_path("../workflow/report/report.html.j2"),
        captions=report_caption_files,
    output:
        html=report(
            REPORT_HTML,
            caption="../workflow/report/report_page.rst",
            category="Report",
            labels={"page": "memcap report"},
        ),
    log:
        "logs/render_report/render_report.log",
    group:
        REPORT_GROUP
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=1000,
    params:
        config=config,
        title=config["report"]["title"],
        stages=report_stages,
        layout=report_layout_param,
    script:
        "../workflow/scripts/render_report.py"
