"""The "Server counters" section: each point's ``/metrics`` deltas beside the records.

Renders :class:`~kvlab.analysis.server_counters.PointCounters` from the
evaluation; computes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvlab.analysis.server_counters import Check, PointCounters
from kvlab.markdown import row
from kvlab.report.section import ReportInput, Section

TITLE = "Server counters (/metrics)"


def _n(value: float | int | None) -> str:
    return "—" if value is None else f"{value:g}"


def _verdict(check: Check) -> str:
    if check.status == "not checkable":
        return f"not checkable: {check.why}"
    return check.status


def section_body(points: Sequence[PointCounters]) -> str:
    """The section's Markdown without its title; "" when no server had ``/metrics``."""
    if not points:
        return ""
    lines = [
        "The server's own counters, read before each point's first request and after its "
        "last answer (warm-ups are before; failed requests are in), as deltas. Check: "
        "Δ prompt tokens = Σ of the prompt tokens the server reported per request "
        "(vLLM counts every prompt token; llama.cpp and kvlab serve the ones they "
        "computed, so the records count prompt − cached); the same for generated "
        "tokens; a difference flags the point (see Validation). — : the server has no "
        "such counter.", "",
        "| mode | capacity | load | server | rows | Δ prompt tok | Σ records | prompt "
        "check | Δ generated | Σ output | generated check | Δ preemptions | Δ prefix "
        "queries | Δ prefix hits |",
        "|" + "---|" * 14,
    ]
    for p in points:
        d = p.deltas
        lines.append(row([p.mode, p.capacity, p.load or 'sequential', p.server, p.rows,
                          _n(p.prompt.delta), _n(p.prompt.records), _verdict(p.prompt),
                          _n(p.generation.delta), _n(p.generation.records), _verdict(p.generation),
                          _n(d['preemptions']), _n(d['prefix_cache_queries']),
                          _n(d['prefix_cache_hits'])]))
    unasked = [p for p in points if p.prefix_hits_unasked]
    if unasked:
        lines += ["", "Prefix cache hits where no request allowed reuse (cache_prompt = "
                  "false): " + "; ".join(
                      f"{p.mode} @ {p.capacity} {p.load or 'sequential'}: "
                      f"{_n(p.deltas['prefix_cache_hits'])} tokens" for p in unasked)
                  + ". Those rows timed less prefill than their prompts hold: their points "
                  "are refused as prefix_reuse (see Validation)."]
    return "\n".join(lines) + "\n"


def server_counters_markdown(points: Sequence[PointCounters]) -> str:
    """The section for report.md ("" without counters)."""
    body = section_body(points)
    return f"\n## {TITLE}\n\n{body}" if body else ""


class ServerCounters(Section):
    """Each point's /metrics deltas and their checks against the records."""

    heading = TITLE

    def body(self, report: ReportInput) -> str:
        return section_body(report.evaluation.server_counters)
