"""The "Sessions" section: a sessions load's turns by turn index, its sessions, the
growth of their prompts, their cache against the prediction and their think times,
rendered from the run's Evaluation (:mod:`kvlab.analysis.sessions`); report.html
adds TTFT and the cached share against turn index. Left out of a run without sessions.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvlab.analysis.checks import SESSIONS
from kvlab.analysis.sessions import SessionsCell
from kvlab.analysis.stats import Distribution
from kvlab.markdown import row
from kvlab.report import plots
from kvlab.report.html_blocks import img, markdown_block, section
from kvlab.report.section import ReportInput, Section, checked

MAX_LINES = 12  # turns named per list; every turn is in evaluation.json


def _ms(d: Distribution, stat: str = "p50") -> str:
    value = getattr(d, stat) if d.count else None
    return "—" if value is None else f"{value:.1f}"


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def _named(head: str, items: Sequence[str]) -> list[str]:
    shown = [f"  - {item}" for item in items[:MAX_LINES]]
    more = [f"  - and {len(items) - MAX_LINES} more (evaluation.json)"] \
        if len(items) > MAX_LINES else []
    return [head, *shown, *more] if items else []


def cell_lines(c: SessionsCell) -> list[str]:
    """One cell: its turns by index, then its sessions, growth, think time and drift."""
    lines = [f"### {c.mode} @ {c.capacity} {c.load or ''}".rstrip(), "",
             "| turn | sent | valid | TTFT p50 | TTFT mean | ITL mean | e2e p50 | "
             "cached share | predicted | drifted |", "|---|---|---|---|---|---|---|---|---|---|"]
    for i in c.by_index:
        lines.append(row([i.index, i.sent, i.valid, _ms(i.ttft_ms), _ms(i.ttft_ms, 'mean'),
                          _ms(i.itl_ms, 'mean'), _ms(i.e2e_ms), _share(i.cached_share),
                          _share(i.predicted_share), i.drifted]))
    runs = c.runs
    ended = [r for r in runs if r.ended]
    mean = (lambda xs: sum(xs) / len(xs)) if runs else (lambda xs: 0.0)
    lines += ["", f"- {len(runs)} session runs, {len(ended)} ended by a refused turn, "
              f"{c.not_sent} turns not sent; per session, mean total "
              f"{mean([r.total_ms for r in runs]):.1f} ms: waiting on the server "
              f"{mean([r.waiting_ms for r in runs]):.1f} ms, thinking (and send lag) "
              f"{mean([r.thinking_ms for r in runs]):.1f} ms."]
    lines += _named("- Sessions ended:", [f"{r.session} rep {r.repetition}: {r.ended}; "
                                          f"{r.not_sent} turns not sent" for r in ended])
    overhead = ", ".join(f"{roles or 'none'} {n:+d}" for roles, n in c.overhead.items())
    exact = c.growth_checked - len(c.growth_off)
    lines.append(f"- Prompt growth: {exact} of {c.growth_checked} turns grew by exactly the "
                 "previous answer (the server's count) + the new input + the chat "
                 f"template's tokens per turn ({overhead or 'none checked'}).")
    lines += _named("- Grew otherwise:", c.growth_off)
    if c.think_error_p95_ms is not None:
        lines.append(f"- Think time: p95 of |measured − asked| = {c.think_error_p95_ms:.2f} "
                     f"ms over {c.think_checked} turns (from the awaited answer's end to "
                     "the send).")
    kept, known = c.kept_previous
    if known:
        lines.append(f"- Prefix cache: {kept} of {known} turns found at least their previous "
                     "turn's whole prompt in it (rounded down to a block of 16).")
    lines += _named("- Cache drifted from the prediction (a block or more):", c.drift)
    return [*lines, ""]


def sessions_body(cells: Sequence[SessionsCell]) -> str:
    """The section's Markdown ("" without sessions)."""
    if not cells:
        return ""
    lines = [
        "Each session's turn left once the answers it waited for had fully arrived, plus "
        "its think time, and sent the history (the server's own answers) as chat "
        "messages. Per turn index (its place in its chain), over the valid turns: TTFT, "
        "effective ITL and e2e (ms), and the share of the prompt the server served from "
        "its prefix cache beside the share predicted (the trace's hash_ids through an "
        "LRU of blocks, else the session's own history: the previous prompt and answer, "
        "rounded down to a block). A refused turn ends its session: its remaining turns "
        "are not sent, and nothing is measured against a history nobody asked for.", ""]
    for c in cells:
        lines += cell_lines(c)
    return "\n".join(lines)


class Sessions(Section):
    """A sessions load's turns and sessions."""

    heading = "Sessions"

    def body(self, report: ReportInput) -> str:
        return checked(report, SESSIONS, sessions_body)

    def html(self, report: ReportInput) -> str:
        body = self.body(report)
        if not body:
            return ""
        png = plots.sessions_by_turn(report.evaluation.found(SESSIONS))
        figure = img(png, "TTFT and cached share by turn") if png is not None else ""
        return section(self.title(report), figure + markdown_block(body))
