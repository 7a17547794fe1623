"""Report stage: one self-contained HTML page from every enabled stage's outputs.

Its functions (targets, inputs, benchmark discovery) live in the report section of
rules/common.smk.
"""


rule render_report:
    input:
        extract=report_extract_files,
        assumptions=report_assumptions_files,
        synthetic=report_synthetic_files,
        capacity=report_capacity_files,
        aot=report_aot_files,
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
        rule_stages=report_rule_stages,
        caption_rules=report_caption_rules,
    script:
        "../workflow/scripts/render_report.py"
