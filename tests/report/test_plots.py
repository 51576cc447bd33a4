"""Figures: PNG bytes when there is something to draw, None otherwise."""

from __future__ import annotations

from kvlab.analysis.summaries import summarize_run
from kvlab.analysis.valid_rows import judge
from kvlab.report import plots
from tests.report.synthetic_runs import make_row, two_mode_rows

PNG = b"\x89PNG\r\n\x1a\n"


def test_every_figure_of_a_two_mode_run_is_a_png() -> None:
    rows = judge(two_mode_rows(n=5))
    summaries = summarize_run(rows, resamples=50)
    for png in (plots.phase_bars(summaries), plots.latency_cdfs(rows),
                plots.against_prompt_length(rows)):
        assert png is not None and png.startswith(PNG) and len(png) > 5_000


def test_phase_bars_need_server_timings() -> None:
    rows = judge([r.model_copy(update={"timings": None}) for r in two_mode_rows(n=5)])
    assert plots.phase_bars(summarize_run(rows, resamples=50)) is None
    assert plots.latency_cdfs(rows) is not None  # client clocks are still there


def test_throughput_plot_only_with_several_load_points() -> None:
    one = [make_row("a", 256, q, prefill=10, decode=20, start_ms=q * 10.0) for q in range(5)]
    assert plots.throughput_vs_load(summarize_run(judge(one), resamples=50)) is None
    sweep = [make_row("a", 256, q, prefill=10 * c, decode=20, load=f"c={c}",
                      start_ms=1000.0 * c + q * 40.0 / c)
             for c in (1, 2, 4) for q in range(5)]
    png = plots.throughput_vs_load(summarize_run(judge(sweep), resamples=50))
    assert png is not None and png.startswith(PNG)
