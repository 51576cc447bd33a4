"""The "Validation" section: how many rows the figures stand on, and why the others
were refused (row by row, pairs of modes, and whole points by the server's counters).
"""

from __future__ import annotations

from collections import Counter
from html import escape

from kvlab.analysis.evaluate import Evaluation
from kvlab.analysis.validate import Violation
from kvlab.labels import load_order
from kvlab.report.html_blocks import markdown_block, section, table
from kvlab.report.markdown import md_table
from kvlab.report.section import ReportInput, Section

PREFIX_REUSE = ("Prefix reuse (cache_prompt = false: a row answered partly from the server's "
                "prefix cache is refused, by its own cached-token count or by the server's "
                "prefix-cache counter over its point):")


def verdicts_lines(evaluation: Evaluation) -> list[str]:
    """The point verdicts of the server counters, as Markdown lines ([] without any)."""
    if not evaluation.verdicts:
        return []
    mode = ("--strict: counters that disagree with the records, or could not be read, and "
            "a client error over its share refuse their point" if evaluation.strict else
            "counters that disagree with the records, or could not be read, and a client "
            "error over its share flag their point; kvlab evaluate --strict refuses it")
    lines = ["Verdicts on whole points, of the server's own counters (/metrics) and the "
             f"client's error budget ({mode}):", ""]
    lines += [f"- {'REFUSED' if v.refuses else 'FLAGGED'} ({v.reason}): {v.describe()}"
              for v in evaluation.verdicts]
    return [*lines, ""]


class Validation(Section):
    """Rows measured, valid and refused, with every refusal named."""

    heading = "Validation"

    def body(self, report: ReportInput) -> str:
        evaluation = report.evaluation
        counts = evaluation.counts
        lines = [f"{counts['records']} records: {counts['warmup']} warm-up, "
                 f"{counts['measured']} measured rows ({counts['superseded']} earlier "
                 "attempts superseded by a resume): "
                 f"{evaluation.valid.count.describe(flags=False)}. Every figure below "
                 "stands on the valid rows only and says how many (n of m).", ""]
        lines += verdicts_lines(evaluation)
        if evaluation.violations:
            loads = any(v.load is not None for v in evaluation.violations)
            lines += md_table(["mode", "capacity", *(["load"] if loads else []), "query",
                               "rep", "reason", "detail"], [
                [v.mode if v.other_mode is None else f"{v.mode} vs {v.other_mode}",
                 str(v.capacity), *([v.load or "sequential"] if loads else []), v.query_id,
                 str(v.repetition), str(v.reason), v.detail]
                for v in evaluation.violations
            ])
        else:
            lines.append("No row or pair was refused.")
        if evaluation.prefix_reuse:
            lines += ["", PREFIX_REUSE, ""]
            lines += [f"- {p.describe()}" for p in evaluation.prefix_reuse]
        return "\n".join(lines) + "\n"

    def html(self, report: ReportInput) -> str:
        evaluation = report.evaluation
        violations = evaluation.row_violations
        pair_notes: list[Violation] = [v for c in evaluation.pairs for v in c.pair_violations]
        refused = {v.row_key for v in violations}  # one row per load point it ran at
        counts = evaluation.counts
        parts = [f"<p>{counts['records']} records: {counts['warmup']} warm-up, "
                 f"{counts['measured']} measured, {len(refused)} rows refused "
                 "(left out of every aggregate): "
                 f"{escape(evaluation.valid.count.describe(flags=False))}.</p>"]
        per_point = Counter(load for *_, load in refused)
        if any(load is not None for load in per_point):
            parts.append("<p>Refused rows per load point: " + escape(", ".join(
                f"{load or 'sequential'} × {per_point[load]}"
                for load in sorted(per_point, key=load_order))) + "</p>")
        verdicts = verdicts_lines(evaluation)
        if verdicts:
            parts.append(markdown_block("\n".join(verdicts)))
        if violations or pair_notes:
            rows = [[v.mode if v.other_mode is None else f"{v.mode} vs {v.other_mode}",
                     str(v.capacity), v.load or "sequential", v.query_id, str(v.repetition),
                     str(v.reason), v.detail]
                    for v in [*violations, *pair_notes]]
            reasons = Counter(str(v.reason) for v in [*violations, *pair_notes])
            parts.append("<p>Refusals by reason: " + escape(", ".join(
                f"{k} × {n}" for k, n in reasons.most_common())) + "</p>")
            parts.append(table(["mode", "capacity", "load", "query", "rep", "reason",
                                "detail"], rows, 7))
        else:
            parts.append("<p>No row or pair was refused.</p>")
        if evaluation.prefix_reuse:
            parts.append(f"<p>{escape(PREFIX_REUSE)}</p><ul>" + "".join(
                f"<li>{escape(p.describe())}</li>" for p in evaluation.prefix_reuse) + "</ul>")
        return section(self.heading, "\n".join(parts))
