"""The "Server histograms" section: vLLM's own request histograms per point, beside the
client's distribution of the same quantity, and the flag on a client TTFT below vLLM's.

Renders :class:`~kvlab.analysis.server_histograms.PointHistograms` from the
evaluation; computes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvlab.analysis.checks import SERVER_HISTOGRAMS
from kvlab.analysis.server_histograms import (
    QUANTILES,
    BucketQuantile,
    Histogram,
    PointHistograms,
)
from kvlab.markdown import row
from kvlab.report.section import ReportInput, Section, checked

TITLE = "Server histograms (/metrics)"


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def _server(b: BucketQuantile | None) -> str:
    """"interpolated (low, high]" in ms."""
    if b is None:
        return "—"
    high = "∞" if b.high is None else f"{b.high:.4g}"
    return f"{b.value:.4g} ({b.low:.4g}, {high}]"


def _row(h: Histogram) -> str:
    server = [_server(h.quantiles[q]) for q in QUANTILES]
    if h.quantity.client is None:
        client = ["—"] * (len(QUANTILES) + 1)
    else:
        client = [str(h.client_values), *(_ms(h.client[q]) for q in QUANTILES)]
    return row([h.quantity.label, h.count, _ms(h.mean_ms), *server, *client])


def section_body(points: Sequence[PointHistograms]) -> str:
    """The section's Markdown without its title; "" when no server kept histograms."""
    if not points:
        return ""
    ps = [f"p{q:g}" for q in QUANTILES]
    lines = [
        "The server's own histograms of the requests it finished during each point "
        "(the difference of its readings before the point's first request and after its "
        "last answer), in ms. A server quantile is the value interpolated linearly in "
        "its bucket, as Prometheus' histogram_quantile does, then the bucket's bounds "
        "(low, high]: the server knows no more than the bucket. Beside it, the client's "
        "distribution of the same quantity over the point's answered requests: TTFT to "
        "the first token of any kind, decode as last output chunk − first, end-to-end "
        "as end − sent, inter-token as the gaps between output chunks (n: values). "
        "— : not measured on that side.", "",
    ]
    for p in points:
        where = f"{p.mode} @ {p.capacity} {p.load or 'sequential'}"
        lines += [f"{where} ({p.rows} answered requests):", "",
                  "| quantity | server n | server mean | "
                  + " | ".join(f"server {x}" for x in ps) + " | client n | "
                  + " | ".join(f"client {x}" for x in ps) + " |",
                  "|" + "---|" * (4 + 2 * len(QUANTILES)),
                  *(_row(h) for h in p.histograms), ""]
    flags = [f for p in points for f in p.flags]
    if flags:
        lines += ["**Flagged:** " + "; ".join(flags) + ".", ""]
    else:
        lines += ["No point's client TTFT is below the server's own at the same quantile "
                  "(below its bucket's lower bound): the client's clock and parse pass "
                  "that check.", ""]
    return "\n".join(lines)


def server_histograms_markdown(points: Sequence[PointHistograms]) -> str:
    """The section for report.md ("" without server histograms)."""
    body = section_body(points)
    return f"\n## {TITLE}\n\n{body}" if body else ""


class ServerHistograms(Section):
    """The server's request histograms beside the client's distributions."""

    heading = TITLE

    def body(self, report: ReportInput) -> str:
        return checked(report, SERVER_HISTOGRAMS, section_body)
