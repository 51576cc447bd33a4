"""Comparisons with intervals: ratios with their 95 % interval and verdict.

``pairs_markdown`` renders an evaluation's pairs as report.md shows them in the section
:class:`Intervals`; report.html uses the same cell formatting, with verdicts coloured,
so both read alike. Comparisons are computed by :mod:`kvlab.analysis.comparisons` only;
``intervals_markdown`` calls it for validated rows that have no evaluation.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from kvlab.analysis.comparisons import MetricComparison, PairComparison, compare_run
from kvlab.analysis.stats import MIN_BOOTSTRAP_VALUES
from kvlab.analysis.valid_rows import ValidRows
from kvlab.markdown import row
from kvlab.report.html_blocks import section
from kvlab.report.section import ReportInput, Section


def fmt_num(x: float | None, digits: int = 2) -> str:
    """A number with ``digits`` decimals and thousands separators; "–" for None."""
    return "–" if x is None else f"{x:,.{digits}f}"


def fmt_interval(c: MetricComparison) -> str:
    """"[low, high]" of the ratio, or "–" when too few values for an interval."""
    if c.interval is None:
        return "–"
    return f"[{c.interval.low:.3f}, {c.interval.high:.3f}]"


def verdict_text(c: MetricComparison, mode_b: str) -> str:
    """"B faster" / "B slower" / "no detectable difference" / "too few rows"."""
    v = c.verdict
    if v is None and c.note:
        return c.note
    if v is None:
        return f"too few rows (< {MIN_BOOTSTRAP_VALUES})"
    if str(v) == "no detectable difference":
        return str(v)
    return f"{mode_b} {v}"


def load_label(load: str | None) -> str:
    return "sequential" if load is None else load


def comparison_rows(p: PairComparison) -> list[dict[str, Any]]:
    """One dict of display strings per metric of a pair (shared with the HTML table)."""
    rows = []
    for c in p.metrics:
        rows.append({
            "metric": c.metric,
            "mean_a": fmt_num(c.mean_a),
            "mean_b": fmt_num(c.mean_b),
            "ratio": f"{c.ratio:.3f}",
            "interval": fmt_interval(c),
            "reduction": f"{100 * c.reduction:+.1f} %",
            "verdict": verdict_text(c, p.mode_b),
            "n": f"{c.n}{' paired' if c.paired else ''}",
        })
    return rows


def comparisons_markdown(comparisons: Sequence[PairComparison]) -> str:
    """Markdown section body: one table per pair of modes at a capacity and load."""
    if not comparisons:
        return "No comparison: no two modes share a capacity.\n"
    lines = [
        "Ratio = mean A / mean B of a time; above 1, B took less time. The 95 % interval "
        "is a bootstrap (BCa) interval; the verdict is read from it alone (containing 1: "
        "no detectable difference, which is not proof of equality). Reduction = 1 − B/A.",
        "",
    ]
    for p in comparisons:
        title = (f"**{p.mode_a}** (A) vs **{p.mode_b}** (B) at capacity {p.capacity}, "
                 f"{load_label(p.load)}")
        lines.append(title)
        lines.append("")
        lines.extend([f"Rows: A {p.count_a.describe()}; B {p.count_b.describe()}.", ""])
        if p.refused:
            lines.extend([f"Refused: {p.refused}", ""])
            continue
        lines.append("| metric | mean A (ms) | mean B (ms) | ratio A/B | 95 % interval "
                     "| reduction | verdict | n |")
        lines.append("|---|---:|---:|---:|---|---:|---|---:|")
        for r in comparison_rows(p):
            lines.append(row([r['metric'], r['mean_a'], r['mean_b'], r['ratio'], r['interval'],
                              r['reduction'], r['verdict'], r['n']]))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def pairs_markdown(pairs: Sequence[PairComparison], named: bool = True) -> str:
    """The "comparisons with intervals" section body of report.md: ``pairs`` as the
    evaluation holds them (``named`` False: the experiment named none, so every pair of
    modes is compared, and the text says so)."""
    note = "" if named or not pairs else (
        "The experiment names no pairs: every pair of modes is compared.\n\n")
    return note + comparisons_markdown(pairs)


def intervals_markdown(valid: ValidRows, pairs: Sequence[tuple[str, str]] = (),
                       *, resamples: int = 2000) -> str:
    """:func:`pairs_markdown` of the comparisons of ``valid`` (every pair of modes when
    ``pairs`` names none), for validated rows that have no evaluation yet."""
    comparisons = compare_run(valid, list(pairs) or None, resamples=resamples)
    return pairs_markdown(comparisons, named=bool(pairs))


_VERDICT_CLASS = {"faster": "faster", "slower": "slower"}


class Intervals(Section):
    """Every pair of modes at each capacity and load: ratios with their 95 % interval
    and the verdict read from it (report.html colours the verdicts)."""

    heading = "Comparisons with 95 % intervals and verdicts"

    def body(self, report: ReportInput) -> str:
        text = pairs_markdown(report.evaluation.pairs, report.evaluation.named_pairs)
        return text.rstrip() + "\n" if text else ""

    def html(self, report: ReportInput) -> str:
        comparisons, named = report.evaluation.pairs, report.evaluation.named_pairs
        parts = ["<p>Ratio = mean A / mean B of a time at equal capacity and load: above 1, "
                 "B took less time. The 95 % interval is a bootstrap (BCa) interval, paired "
                 "over the queries both modes answered validly; the verdict is read from the "
                 "interval alone (containing 1: no detectable difference - not proof of "
                 "equality). Reduction = 1 − B/A.</p>"]
        if not named and comparisons:
            parts.append("<p class=muted>The experiment names no pairs: every pair of modes "
                         "is compared.</p>")
        if not comparisons:
            parts.append("<p>No comparison: a single mode at every capacity.</p>")
        for p in comparisons:
            parts.append(f"<h3>{escape(p.mode_a)} (A) vs {escape(p.mode_b)} (B) — capacity "
                         f"{p.capacity}, {escape(load_label(p.load))}</h3>")
            if p.refused:
                parts.append(f'<p class="warn">Refused: {escape(p.refused)}</p>')
                continue
            body = []
            for r, c in zip(comparison_rows(p), p.metrics, strict=True):
                cls = _VERDICT_CLASS.get(str(c.verdict), "nodiff")
                cells = [r["metric"], r["mean_a"], r["mean_b"], r["ratio"], r["interval"],
                         r["reduction"]]
                tds = "".join(f"<td{' class=l' if i == 0 else ''}>{escape(x)}</td>"
                              for i, x in enumerate(cells))
                body.append(f"<tr>{tds}<td class='l {cls}'>{escape(r['verdict'])}</td>"
                            f"<td>{escape(r['n'])}</td></tr>")
            head = "".join(f"<th>{h}</th>" for h in (
                "metric", "mean A (ms)", "mean B (ms)", "ratio A/B", "95 % interval",
                "reduction", "verdict", "n"))
            parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}"
                         "</tbody></table>")
        return section(self.heading, "\n".join(parts))
