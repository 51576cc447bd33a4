"""The "Reasoning streams" section: TTFT and the time to first answer token, apart.

Renders :class:`~kvlab.analysis.reasoning.ReasoningCell` from the evaluation;
computes nothing. Absent when no valid row carried reasoning.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvlab.analysis.checks import REASONING
from kvlab.analysis.percentiles import Distribution
from kvlab.analysis.reasoning import ReasoningCell
from kvlab.markdown import row
from kvlab.report.section import ReportInput, Section, checked

TITLE = "Reasoning streams"


def _n(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _times(d: Distribution, p90: float | None) -> str:
    """"p50 / p90" in ms."""
    return "—" if d.count == 0 else f"{_n(d.p50)} / {_n(p90)}"


def section_body(cells: Sequence[ReasoningCell]) -> str:
    """The section's Markdown without its title; "" when nothing reasoned."""
    if not cells:
        return ""
    lines = [
        "A reasoning model streams its thinking before its answer. kvlab counts the "
        "thinking as output: TTFT runs to the first token of any kind, ITL and the chunk "
        "counts cover every output token; the time to first answer token is kept apart. "
        "Times in ms as p50 / p90 over the valid rows. Reasoning tokens: streamed "
        "(one per reasoning chunk, the count kvlab uses) and as the server's usage "
        "reported them (completion_tokens_details.reasoning_tokens; — : not reported).",
        "",
        "| mode | capacity | load | valid rows | with reasoning | TTFT (any token) | first "
        "answer token | reasoning tok streamed (mean) | usage's reasoning tok (mean) | "
        "usage disagrees |",
        "|" + "---|" * 10,
    ]
    for c in cells:
        lines.append(row([c.mode, c.capacity, c.load or 'sequential',
                          f"{c.count.valid} of {c.count.of}", c.reasoning_rows,
                          _times(c.ttft_ms, c.p90_ms[0]), _times(c.answer_ttft_ms, c.p90_ms[1]),
                          _n(c.reasoning_tokens.mean, 1), _n(c.usage_reasoning_tokens.mean, 1),
                          c.disagreeing]))
    disagree = [c for c in cells if c.disagreeing]
    if disagree:
        lines += ["", "Where the usage's reasoning count differs from the stream, the "
                  "streamed count is used and the row's record says so (its notes): "
                  + "; ".join(f"{c.mode} @ {c.capacity} {c.load or 'sequential'}: "
                              f"{c.disagreeing} rows" for c in disagree) + "."]
    return "\n".join(lines) + "\n"


def reasoning_markdown(cells: Sequence[ReasoningCell]) -> str:
    """The section for report.md ("" when nothing reasoned)."""
    body = section_body(cells)
    return f"\n## {TITLE}\n\n{body}" if body else ""


class Reasoning(Section):
    """TTFT and the time to first answer token of the cells that streamed reasoning."""

    heading = TITLE

    def body(self, report: ReportInput) -> str:
        return checked(report, REASONING, section_body)
