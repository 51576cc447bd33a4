"""The "Client error" section: each load point's client error budget beside its TTFT,
and the connection set-up its requests paid (the figures are
:mod:`kvlab.analysis.client_error`'s)."""

from __future__ import annotations

from collections.abc import Sequence

from kvlab.analysis.client_error import ClientError
from kvlab.markdown import table
from kvlab.report.markdown import fmt
from kvlab.report.section import ReportInput, Section

INTRO = ("The client's own error on each load point, in ms: send lag p99 (when a request "
         "left − when its schedule wanted it), event-loop lag p50 (a callback queued as a "
         "request was written, waiting for the loop), read lag p50 (a read waiting in the "
         "socket for the loop) and the mean connection set-up per request (0 on a "
         "connection the point's warm-up opened ahead; set-up is never in TTFT). Their sum "
         "is shown beside the point's median TTFT as a share; load kept = achieved against "
         "configured (a closed loop's most in flight against its users, an open loop's "
         "rate of leaving against its schedule); ingest = the busiest second of events "
         "against this machine's calibrated limit (kvlab calibrate). A point above its "
         "limit is FLAGGED in every output; kvlab evaluate --strict refuses it.")


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:.1%}"


def section_body(errors: Sequence[ClientError]) -> str:
    """The section's Markdown ("" without a load point)."""
    if not errors:
        return ""
    header = ["mode", "capacity", "load", "rows", "TTFT p50", "send lag p99",
              "loop lag p50", "read lag p50", "set-up mean", "client error", "share",
              "load shortfall", "ingest", "verdict"]
    rows = [[e.mode, e.capacity, e.load, e.rows, fmt(e.ttft_p50_ms, 3),
             fmt(e.send_lag_p99_ms, 3), fmt(e.loop_lag_p50_ms, 3), fmt(e.read_lag_p50_ms, 3),
             fmt(e.setup_mean_ms, 3), fmt(e.bound_ms, 3), _pct(e.share),
             _pct(e.load_shortfall), _pct(e.ingest_share),
             "FLAGGED: " + "; ".join(e.over) if e.over else f"within {e.limit:.0%}"]
            for e in errors]
    lines = [INTRO, "", *table(header, rows)]
    paid = [e for e in errors if e.setup_paid]
    for e in paid:
        what = (f"{e.mode} @ {e.capacity} {e.load}: the server closed its connection after "
                "each answer, so every request paid the connection set-up"
                if e.closes_each_answer else
                f"{e.mode} @ {e.capacity} {e.load}: {e.setup_paid} of {e.rows} requests "
                "opened their own connection")
        lines += ["", f"- {what} (median {fmt(e.setup_paid_p50_ms, 3)} ms each, apart from "
                  "TTFT)."]
    return "\n".join(lines) + "\n"


class ClientErrorSection(Section):
    """Each load point's client error budget against its TTFT, and the set-up paid."""

    heading = "Client error"

    def body(self, report: ReportInput) -> str:
        return section_body(report.evaluation.client_errors)
