"""The "Figures" section of report.html: phase bars, latency CDFs, TTFT and ITL against
prompt length, throughput against load and the server's gauges, as inline PNGs.
report.md has no images, so it leaves the section out."""

from __future__ import annotations

from kvlab.analysis.summaries import report_order
from kvlab.report import across_runs, plots
from kvlab.report.html_blocks import img, section
from kvlab.report.section import ReportInput, Section


class Figures(Section):
    """The run's plots (report.html only)."""

    heading = "Figures"

    def body(self, report: ReportInput) -> str:
        return ""  # no images in report.md

    def html(self, report: ReportInput) -> str:
        valid = report.evaluation.valid
        summaries = report_order(report.evaluation.summaries)
        figures = [
            ("Phase bars", plots.phase_bars(summaries),
             "Mean prefill, decode and overhead per mode (server timings)."),
            ("Latency distributions", plots.latency_cdfs(valid),
             "Empirical CDFs of e2e and TTFT: the further left, the faster."),
            ("TTFT and ITL against prompt length", plots.against_prompt_length(valid),
             "Prefill grows with the prompt; ITL should stay flat with a KV cache."),
            ("Throughput against load", plots.throughput_vs_load(summaries),
             "System output tokens/s and mean e2e per load point."),
            ("Throughput against latency (Pareto)", across_runs.run_pareto(report.evaluation),
             "Output tokens/s of the valid rows against their p95 effective ITL, per load "
             "point and mode; ringed: the points no other point beats on both."),
            ("Server gauges during the load points", plots.gauges_over_time(report.gauges),
             "The server's /metrics, polled every 0.25 s (gauges.jsonl): requests running "
             "and waiting, KV blocks in use."),
        ]
        parts = [f"<h3>{title}</h3><p class=muted>{caption}</p>{img(png, title)}"
                 for title, png, caption in figures if png is not None]
        return section(self.heading, "\n".join(parts))
