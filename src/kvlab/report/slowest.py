"""The slowest valid row of each group (:mod:`kvlab.analysis.slowest`)."""

from __future__ import annotations

from kvlab.analysis.checks import SLOWEST
from kvlab.analysis.slowest import Slowest
from kvlab.report.section import ReportInput, Section, checked


def _table(found: list[Slowest]) -> str:
    if not found:
        return ""
    lines = ["| mode | capacity | load | query | e2e ms |", "|---|---|---|---|---|"]
    lines += [f"| {s.mode} | {s.capacity} | {s.load or 'sequential'} | {s.query_id} | "
              f"{s.e2e_ms:.1f} |" for s in found]
    return "\n".join(lines) + "\n"


class SlowestRows(Section):
    """The slowest valid row per group."""

    heading = "Slowest rows"

    def body(self, report: ReportInput) -> str:
        return checked(report, SLOWEST, _table)
