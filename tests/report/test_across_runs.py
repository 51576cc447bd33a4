"""Figures across runs: the Pareto plot, its frontier, an overlay, a page of its own."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from kvlab.analysis.evaluation_file import StoredEvaluation
from kvlab.report.across_runs import (
    ParetoPoint,
    Series,
    frontier,
    load_series,
    overlay,
    pareto,
    pareto_points,
)
from kvlab.run.runner import evaluate_run
from tests.history.runs import write_load_run

PNG = b"\x89PNG\r\n\x1a\n"


def point(line: str, load: str, tps: float | None, itl: float | None) -> ParetoPoint:
    return ParetoPoint(line, load, tps, itl, None if itl is None else 2 * itl)


def test_the_frontier_is_the_points_nothing_beats() -> None:
    points = [point("a", "c=1", 10, 5), point("a", "c=2", 18, 9), point("a", "c=4", 17, 20),
              point("b", "c=1", 9, 6), point("b", "c=2", 18, 9), point("b", "c=4", 30, 40),
              point("b", "c=8", None, 50)]
    best = frontier(points, "itl")
    assert [(p.line, p.load) for p in best] == [("a", "c=1"), ("a", "c=2"), ("b", "c=2"),
                                                ("b", "c=4")]
    assert frontier(points, "ttft") == best  # ttft = 2 itl here: the same order


def test_a_pareto_plot_needs_a_line_of_two_points() -> None:
    assert pareto([point("a", "c=1", 10, 5), point("b", "c=1", 11, 6)]) is None
    assert pareto([point("a", "c=1", 10, None), point("a", "c=2", 11, None)]) is None
    png = pareto([point("a", "c=1", 10, 5), point("a", "c=2", 18, 9)], "ttft")
    assert png is not None and png.startswith(PNG)


def test_a_run_s_load_points_carry_its_evaluation_s_figures(tmp_path: Path) -> None:
    evaluation = evaluate_run(write_load_run(tmp_path / "r1", "r1", evaluate=False))
    points = pareto_points(evaluation, prefix="r1 · ")
    assert sorted((p.line, p.load) for p in points) == [
        ("r1 · fast", "c=1"), ("r1 · fast", "c=2"), ("r1 · slow", "c=1"), ("r1 · slow", "c=2")]
    for p in points:
        mode = p.line.removeprefix("r1 · ")
        load = next(x for x in evaluation.load if (x.mode, x.load) == (mode, p.load))
        summary = evaluation.summary(mode, 256, p.load)
        assert summary is not None
        assert p.tokens_per_s == load.output_tokens_per_s
        assert p.itl_p95_ms == summary.metrics["itl_effective_ms"].p95
        assert p.ttft_p95_ms == summary.metrics["ttft_ms"].p95
    png = pareto(points)
    assert png is not None and png.startswith(PNG)


def test_an_overlay_over_time_with_intervals_and_over_load() -> None:
    days = [datetime(2026, 1, d, tzinfo=UTC) for d in (1, 2, 3)]
    png = overlay([Series("fast", days, [1.0, None, 1.2], [0.9, None, 1.1],
                          [1.1, None, 1.3])], "itl_effective_ms", "run start")
    assert png is not None and png.startswith(PNG)
    assert overlay([Series("empty", days, [None, None, None])], "m", "x") is None
    series = load_series([("r1", "c=4", 3.0), ("r1", "c=1", 1.0), ("r2", "c=1", 2.0),
                          ("r1", "sequential", 9.0)])
    assert [(s.label, list(s.xs), list(s.ys)) for s in series] == [
        ("r1", [1.0, 4.0], [1.0, 3.0]), ("r2", [1.0], [2.0])]


def test_a_figure_page_is_self_contained() -> None:
    from kvlab.report.figure_page import figure_page

    page = figure_page(PNG + b"rest", "Pareto <all>", "runs: a, b")
    assert page.startswith("<!DOCTYPE html>") and "data:image/png;base64," in page
    assert "Pareto &lt;all&gt;" in page and "http" not in page.lower().replace(
        "http-equiv", "")


def test_report_html_of_a_load_run_has_the_pareto_plot(tmp_path: Path) -> None:
    from kvlab.report.html import write_html
    from tests.report.synthetic_runs import two_mode_rows, write_run

    load = write_html(write_load_run(tmp_path / "load", "load"))
    assert "<h3>Throughput against latency (Pareto)</h3>" in load.read_text()
    sequential = write_html(write_run(tmp_path / "seq", two_mode_rows(n=4)))
    assert "Pareto" not in sequential.read_text()  # no load point: no figure


def test_the_results_page_draws_every_load_run_s_points(tmp_path: Path) -> None:

    from kvlab.report.results_html import write_index
    from kvlab.report.results_page import results_page

    root = tmp_path / "results"
    write_load_run(root / "runs" / "synthetic-20260101-100000", "r1")
    page = write_index(results_page(root)).read_text()
    assert "<h3>Throughput against latency (Pareto)</h3>" in page
    assert page.count("data:image/png;base64,") == 1
    evaluation = StoredEvaluation.read(root / "runs" / "synthetic-20260101-100000" /
                                       "evaluation.json")
    points = {(p.line, p.load): p for p in pareto_points(evaluation, "synthetic · ")}
    assert sorted(points) == [("synthetic · fast", "c=1"), ("synthetic · fast", "c=2"),
                              ("synthetic · slow", "c=1"), ("synthetic · slow", "c=2")]
    from kvlab.run.runner import evaluate_run

    fresh = {(p.line, p.load): p for p in pareto_points(
        evaluate_run(root / "runs" / "synthetic-20260101-100000"), prefix="synthetic · ")}
    assert fresh == points  # the file and the run's evaluation give the same points
