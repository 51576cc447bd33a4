"""The "Refusals by reason" section: how many measured rows each reason refused."""

from __future__ import annotations

from kvlab.report.markdown import md_table
from kvlab.report.section import ReportInput, Section


class Refusals(Section):
    """Refused rows counted by reason (evaluation.json's counts.refused_by_reason)."""

    heading = "Refusals by reason"

    def body(self, report: ReportInput) -> str:
        refused = report.evaluation.counts.get("refused_by_reason") or {}
        if not refused:
            return ""
        rows = [[str(reason), str(n)] for reason, n in sorted(refused.items())]
        return "\n".join(md_table(["reason", "rows"], rows)) + "\n"
