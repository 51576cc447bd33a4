"""The "KV knee" section: each server's predicted concurrency knee beside the first
closed-loop point whose /metrics show queueing or preemption, and TTFT and ITL against
N with the predicted knee drawn (report.html).

Renders :class:`~kvlab.analysis.knee_check.KneeCheck` from the evaluation;
computes nothing.
"""

from __future__ import annotations

from kvlab.analysis.checks import KNEE
from kvlab.analysis.knee_check import KneeCheck, KneePoint
from kvlab.markdown import row
from kvlab.report import plots
from kvlab.report.html_blocks import img, markdown_block, section
from kvlab.report.section import ReportInput, Section, checked

INTRO = (
    "The knee is the most sequences the server's KV budget holds at their longest "
    "(prompt + output − 1 tokens each, the longest the server counted), predicted by "
    "kvlab memory's rule for that server from the budget it reported (/metrics: vLLM's "
    "num_gpu_blocks, kvlab serve's kv_blocks_total; llama-server's -c and -np). A point "
    "c=N is past the knee when the server preempted, held a request back for KV, or "
    "never ran as many requests at once as the client had in flight (its running gauge, "
    "polled every 0.25 s). One step of the sweep is one point of its N values in order; "
    "the verdict compares the sweep's first N at or above the predicted first past with "
    "the first N measured past the knee.")


def _n(value: float | int | None, digits: int = 0) -> str:
    if value is None:
        return "—"
    return f"{value:.{digits}f}" if digits else f"{value:g}"


def _range(pair: tuple[int, int] | None) -> str:
    if pair is None:
        return "—"
    return str(pair[0]) if pair[0] == pair[1] else f"{pair[0]}–{pair[1]}"


def _verdict(check: KneeCheck) -> str:
    return {"within one step": "within one step", "miss": "**MISS**",
            "agrees: none in the sweep": "agrees: none in the sweep"}.get(
        check.verdict, "not judged")


def summary_table(checks: list[KneeCheck]) -> list[str]:
    lines = ["| mode | capacity | server | prompt tok | output tok | budget (per_seq / "
             "usable) | predicted fits | first past | past it | measured knee | measured "
             "first past | steps | verdict |", "|" + "---|" * 13]
    for c in checks:
        k = c.knee
        budget = f"{k.per_seq} / {k.capacity} {k.unit}" if k else "—"
        lines.append(row([c.mode, c.capacity, c.server, _range(c.prompt_tokens),
                          _range(c.output_tokens), budget, _n(k.fits if k else None),
                          _n(k.first_past if k else None), k.past if k else '—',
                          _n(c.measured_knee), _n(c.measured_first_past) if c.knee else '—',
                          _n(c.steps), _verdict(c)]))
    return lines


def _point_row(p: KneePoint) -> str:
    past = "; ".join(p.reasons) if p.past else ("no" if p.past is False else "no reading")
    return row([p.users, p.in_flight, p.readings, _n(p.running_max), _n(p.waiting_max),
                _n(p.kv_waiting_max), _n(p.preemptions), _n(p.kv_usage_max, 3),
                _n(p.ttft_p50_ms, 1), _n(p.itl_p50_ms, 2), p.valid, past])


def check_body(check: KneeCheck) -> list[str]:
    """One (mode, capacity): its rule, its verdict in numbers, its points."""
    lines = [f"### {check.mode} @ {check.capacity} ({check.server})", ""]
    if check.knee is not None:
        lines += [f"Budget read from {check.budget}: {check.knee.layout}; {check.knee.rule}.",
                  ""]
    lines += [("**Miss.** " if check.verdict == "miss" else "") + check.describe() + ".", "",
              "| N | in flight | readings | running max | waiting max | held for KV | "
              "preemptions | KV use max | TTFT p50 ms | ITL p50 ms | rows | past the knee |",
              "|" + "---|" * 12]
    lines += [_point_row(p) for p in check.points]
    return lines


def section_body(checks: list[KneeCheck]) -> str:
    """The section's Markdown without its title; "" without a check."""
    if not checks:
        return ""
    lines = [INTRO, "", *summary_table(checks)]
    misses = [c for c in checks if c.verdict == "miss"]
    if misses:
        lines += ["", "Predictions that missed by more than one step: " + "; ".join(
            f"{c.mode} @ {c.capacity}: {c.describe()}" for c in misses) + "."]
    for check in checks:
        lines += ["", *check_body(check)]
    return "\n".join(lines) + "\n"


class KneeSection(Section):
    """Predicted against measured concurrency knees, per launched server."""

    heading = "KV knee: predicted against measured"

    def body(self, report: ReportInput) -> str:
        return checked(report, KNEE, section_body)

    def html(self, report: ReportInput) -> str:
        checks = report.evaluation.found(KNEE)
        if not checks:  # the not-measured lines, if any
            return super().html(report)
        parts = [markdown_block("\n".join([INTRO, "", *summary_table(checks)]) + "\n")]
        for check in checks:
            parts.append(markdown_block("\n".join(check_body(check)) + "\n"))
            png = plots.knee_latency(check)
            if png is not None:
                parts.append(img(png, f"TTFT and ITL against N, {check.mode}"))
        return section(self.heading, "\n".join(parts))
