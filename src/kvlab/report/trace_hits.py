"""The "Trace prefix-cache hits" section: the hits a replayed trace's hash_ids predict
for the server's LRU prefix cache, against those it counted; drift stated.

Renders :class:`~kvlab.analysis.trace_hits.PointHits` from the evaluation;
computes nothing.
"""

from __future__ import annotations

from kvlab.analysis.checks import TRACE_HITS
from kvlab.analysis.trace_hits import PointHits
from kvlab.markdown import row
from kvlab.report.section import ReportInput, Section, checked


def _n(value: float | int | None) -> str:
    return "—" if value is None else f"{value:g}"


def section_body(points: list[PointHits]) -> str:
    """The section's Markdown without its title; "" without a replayed trace."""
    if not points:
        return ""
    lines = [
        "Each request's prompt is its trace row's blocks (hash_ids), so the leading "
        "server blocks an earlier request computed should be found in the prefix cache. "
        "Predicted: an LRU replay of the server's pool (its blocks and block size from "
        "/metrics) over every request it served, in the order and at the times the "
        "records give, block by block; counted: Δ of the server's prefix-cache hits "
        "counter over the point; cached: Σ of the cached tokens the records report. "
        "Tokens. Drift: the server counted other hits than the trace encodes.", "",
        "| mode | capacity | load | requests | pool (blocks × tokens) | predicted | "
        "counted (Δ counter) | cached (records) | drift |", "|" + "---|" * 9]
    for p in points:
        lines.append(row([p.mode, p.capacity, p.load or 'sequential', p.requests,
                          f"{p.pool} × {p.block}", p.predicted, _n(p.counted), _n(p.cached),
                          '**drift**' if p.drift else 'none']))
    for p in points:
        if p.differing:
            lines += ["", f"{p.mode} @ {p.capacity} {p.load or 'sequential'}: rows whose "
                      "cached tokens differ from the prediction (query: predicted, "
                      "cached): " + "; ".join(f"{q}: {a}, {_n(b)}" for q, a, b in
                                              p.differing) + "."]
    return "\n".join(lines) + "\n"


class TraceHits(Section):
    """A replayed trace's predicted prefix-cache hits against the server's."""

    heading = "Trace prefix-cache hits: predicted against counted"

    def body(self, report: ReportInput) -> str:
        return checked(report, TRACE_HITS, section_body)
