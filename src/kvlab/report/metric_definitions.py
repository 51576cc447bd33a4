"""The "Metric definitions" section: every declared metric's definition (and unit in
report.html), then what a comparison's ratio and reduction mean; the same text
evaluation.json keeps as ``metric_definitions``.
"""

from __future__ import annotations

from kvlab.analysis.summary_metrics import SUMMARY_METRICS, metric_definitions
from kvlab.report.html_blocks import section, table
from kvlab.report.markdown import md_table
from kvlab.report.section import ReportInput, Section


class MetricDefinitions(Section):
    """What each figure of the reports means."""

    heading = "Metric definitions"

    def body(self, report: ReportInput) -> str:
        rows = [[f"`{name}`", text] for name, text in metric_definitions().items()]
        return "\n".join(md_table(["metric", "definition"], rows)) + "\n"

    def html(self, report: ReportInput) -> str:
        units = {m.name: m.unit for m in SUMMARY_METRICS}
        rows = [[name, units.get(name, ""), text]
                for name, text in metric_definitions().items()]
        return section(self.heading, table(["metric", "unit", "definition"], rows, 3))
