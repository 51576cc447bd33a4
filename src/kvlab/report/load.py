"""The sections of how the load was offered: the run order, what each load point
achieved, and whether the client itself was near its calibrated limit."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from kvlab.analysis.load import LoadSummary
from kvlab.analysis.saturation import ClientCheck
from kvlab.report.html_blocks import section
from kvlab.report.markdown import fmt, md_table, valid_text
from kvlab.report.section import ReportInput, Section


def order_body(order: dict[str, Any] | None) -> str:
    """The order asked for, the one used, and its sequence of blocks ("": none kept)."""
    if not order:
        return ""
    used = order.get("used")
    line = f"Order used: **{used}**"
    if order.get("requested") != used:
        line += f" (asked: {order.get('requested')}; {order.get('reason')})"
    blocks = " → ".join(f"{m}@{c}" + (f"[{p + 1}/{n}]" if n > 1 else "")
                        for m, c, p, n in order.get("sequence", []))
    return f"{line}.\n\nBlocks: {blocks}\n\n"


class RunOrder(Section):
    """Which (mode, capacity) blocks ran in which order (ABBA, interleaved, ...)."""

    heading = "Run order"

    def body(self, report: ReportInput) -> str:
        return order_body(report.evaluation.order)


def load_body(summaries: Sequence[LoadSummary]) -> str:
    """One row per (mode, capacity, load) from analysis.load ("": no load point)."""
    if all(s.load is None for s in summaries):  # sequential rows only
        return ""
    slo = next((s.slo for s in summaries if s.slo), {})
    slo_text = ", ".join(f"{k} ≤ {v:g}" for k, v in slo.items() if v is not None) or "none set"
    text = ("Rates in requests/s. Send lag = t_sent − t_scheduled (how late a request left "
            "against its schedule); a point whose p95 lag exceeds the threshold is flagged "
            "SLIPPED: it offered less load than it claims. Span = first send to last end; "
            "achieved rate = rows / span, shown for a rate load and for a closed loop with "
            "more requests than users (one whose users all leave at once has no rate); "
            "req/s = valid rows / span; out tok/s = Σ output tokens of valid rows / span; "
            f"goodput counts valid rows meeting the SLOs ({slo_text}). valid = n valid "
            "of m requests sent (*: a point flag concerns them); refused: by class.")
    header = ["mode", "capacity", "load", "rows", "ok", "valid", "refused", "span s",
              "target rate", "achieved rate", "lag p50 ms", "lag p99 ms", "max in flight",
              "req/s", "out tok/s", "goodput req/s", "SLO met", "schedule"]
    rows = [[s.mode, str(s.capacity), s.load or "sequential", str(s.requests), str(s.ok),
             valid_text(s.count), s.count.refused_text(),
             fmt(s.span_s, 3), fmt(s.target_rate), fmt(s.achieved_rate),
             fmt(s.send_lag_ms["p50"], 3),
             fmt(s.send_lag_ms["p99"], 3), str(s.max_in_flight), fmt(s.request_throughput),
             fmt(s.output_tokens_per_s, 1), fmt(s.goodput),
             "—" if s.slo_met is None else f"{s.slo_met}/{s.requests}",
             f"SLIPPED ({s.late} late > {s.slip_threshold_ms:g} ms)" if s.slipped else "kept"]
            for s in summaries]
    return "\n".join([text, "", *md_table(header, rows)]) + "\n"


class Load(Section):
    """What each load point offered and achieved, and whether it slipped."""

    heading = "Load"

    def body(self, report: ReportInput) -> str:
        return load_body(report.evaluation.load)


def client_body(check: ClientCheck) -> str:
    """The client check's line, a warning when the client came near its limit."""
    return ("**Warning:** " if check.warning else "") + f"{check.text}.\n\n"


def client_markdown(check: ClientCheck) -> str:
    """The "Client load" section as report.md text."""
    return f"\n## {ClientLoad.heading}\n\n{client_body(check)}"


class ClientLoad(Section):
    """Whether the client's own ingest came near its calibrated limit (kvlab calibrate)."""

    heading = "Client load"

    def body(self, report: ReportInput) -> str:
        check = report.evaluation.client
        return client_body(check) if check is not None else ""

    def html(self, report: ReportInput) -> str:
        check = report.evaluation.client
        if check is None:
            return ""
        css = ' class="warn"' if check.warning else ""
        return section(self.heading, f"<p{css}>{escape(check.text)}.</p>")
