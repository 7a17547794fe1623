"""The HTML report: stage outputs in, verdicts decided, one self-contained page out."""

from memcap.report.assemble import ReportInputs, build_context, write_report
from memcap.report.render import render_html
from memcap.report.verdicts import Verdict, layer_verdicts

__all__ = [
    "ReportInputs",
    "Verdict",
    "build_context",
    "layer_verdicts",
    "render_html",
    "write_report",
]
