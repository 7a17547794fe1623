"""Report stage: one self-contained HTML page from every enabled stage's outputs.

Its input functions live in the report section of rules/common.smk: every file the page
reads is named there from the config (report_layout), never found by walking rules or paths.
"""


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
    conda:
        "../envs/report.yaml"
    threads: 1
    resources:
        mem_mb=1000,
    params:
        config=config,
        title=config["report"]["title"],
        stages=report_stages,
        layout=report_layout,
    script:
        "../workflow/scripts/render_report.py"
