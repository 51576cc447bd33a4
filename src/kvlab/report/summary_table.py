"""The summary table: one row per (mode, capacity, load), a column per declared
statistic (:mod:`kvlab.analysis.summary_metrics`), the same in report.md,
report.html and ``kvlab evaluate``'s table.
"""

from __future__ import annotations

from kvlab.analysis.evaluate import Evaluation
from kvlab.analysis.summary_metrics import SUMMARY_METRICS
from kvlab.report.markdown import fmt, md_table, valid_text
from kvlab.report.section import ReportInput, Section

HEAD = ["mode", "capacity", "valid", "refused"]  # what each row stands on, then metrics


def summary_header(evaluation: Evaluation) -> list[str]:
    """The table's columns, with a "load" column after "capacity" when the run has
    load points."""
    columns = [c.header for m in SUMMARY_METRICS for c in m.columns]
    load = ["load"] if evaluation.has_load else []
    return [*HEAD[:2], *load, *HEAD[2:], *columns]


def summary_rows(evaluation: Evaluation) -> list[list[str]]:
    """One row per (mode, capacity, load), in the columns of :func:`summary_header`."""
    rows = []
    loads = evaluation.has_load
    for s in evaluation.summaries:
        cells = [fmt(s.stat(m, c.stat), c.digits) for m in SUMMARY_METRICS for c in m.columns]
        rows.append([s.mode, str(s.capacity), *([s.load or "sequential"] if loads else []),
                     valid_text(s.count), s.count.refused_text(), *cells])
    return rows


class Summaries(Section):
    """Every summary of the run, over its valid rows."""

    def title(self, report: ReportInput) -> str:
        cell = "(mode, capacity, load)" if report.evaluation.has_load else "(mode, capacity)"
        return f"Summaries per {cell}"

    def body(self, report: ReportInput) -> str:
        lines = ["Times in ms (means unless p95) over the valid rows; valid = n valid of m "
                 "measured (*: a point flag concerns them, see Validation); refused: by "
                 "class; tok/s = Σ output tokens / Σ e2e.", ""]
        lines += md_table(summary_header(report.evaluation), summary_rows(report.evaluation))
        return "\n".join(lines) + "\n"
