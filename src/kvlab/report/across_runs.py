"""Figures across runs and servers: the Pareto plot, and a metric overlaid or over time.

- :func:`pareto`: output tokens/s against the p95 effective ITL (or TTFT) of each load
  point, one line per mode (or per run and mode), the points no other point beats on
  both axes ringed: which server gives the most throughput for a latency.
- :func:`overlay`: any metric against an x value (the load, or the time of each run),
  one line per series, with each point's 95 % interval where it has one.

Both return PNG bytes (None when there is nothing to draw), like :mod:`kvlab.report.plots`;
:func:`kvlab.report.figure_page.figure_page` wraps one in a self-contained HTML page.
The points come from a run's :class:`~kvlab.analysis.evaluate.Evaluation` or its
evaluation.json read back (:func:`pareto_points`), or the run history
(kvlab.history.queries).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from kvlab.analysis.summary_metrics import ITL, TTFT
from kvlab.labels import load_order, parse_label
from kvlab.report.plots import _colours, _figure, _png, _style

if TYPE_CHECKING:
    from kvlab.analysis.evaluate import Evaluation
    from kvlab.analysis.evaluation_file import StoredEvaluation

Latency = Literal["itl", "ttft"]
LATENCY_LABEL = {"itl": "p95 effective ITL (ms)", "ttft": "p95 TTFT (ms)"}


@dataclass(frozen=True)
class ParetoPoint:
    """One load point: its line (a mode, or "run · mode"), its load label, the output
    tokens/s of its valid rows over its span, and the p95 of its rows' effective ITL and
    TTFT (ms; None where no valid row had one)."""

    line: str
    load: str
    tokens_per_s: float | None
    itl_p95_ms: float | None
    ttft_p95_ms: float | None

    def latency(self, which: Latency) -> float | None:
        return self.itl_p95_ms if which == "itl" else self.ttft_p95_ms

    def xy(self, which: Latency) -> tuple[float, float] | None:
        """(latency, tokens/s) where it has both."""
        latency = self.latency(which)
        if latency is None or self.tokens_per_s is None:
            return None
        return latency, self.tokens_per_s


def pareto_points(evaluation: Evaluation | StoredEvaluation, prefix: str = ""
                  ) -> list[ParetoPoint]:
    """The load points of a run's evaluation, live or read back from its evaluation.json
    (sequential rows left out); ``prefix`` goes before each mode's name (a run's id, to
    tell runs apart)."""
    points = []
    for point in evaluation.load:
        if point.load is None:
            continue
        summary = evaluation.summary(point.mode, point.capacity, point.load)
        if summary is None:
            continue
        capacity = f" @ {point.capacity}" if len({p.capacity for p in evaluation.load}) > 1 \
            else ""
        points.append(ParetoPoint(f"{prefix}{point.mode}{capacity}", point.load,
                                  point.output_tokens_per_s, summary.stat(ITL, "p95"),
                                  summary.stat(TTFT, "p95")))
    return points


def frontier(points: Sequence[ParetoPoint], which: Latency) -> list[ParetoPoint]:
    """The points no other point beats: none has at least their tokens/s at no more
    latency, and more of one or less of the other."""
    drawn = [(p, xy) for p in points if (xy := p.xy(which)) is not None]

    def beats(a: tuple[float, float], b: tuple[float, float]) -> bool:
        (la, ta), (lb, tb) = a, b
        return ta >= tb and la <= lb and (ta > tb or la < lb)

    return [p for p, xy in drawn if not any(beats(other, xy) for _, other in drawn)]


def pareto(points: Sequence[ParetoPoint], which: Latency = "itl",
           title: str = "") -> bytes | None:
    """Output tokens/s against p95 latency per load point, one line per ``line`` in
    load order, each point labelled with its load; the frontier ringed. None unless
    some line has two points with both values."""
    lines: dict[str, list[tuple[str, tuple[float, float]]]] = {}
    for p in points:
        if (xy := p.xy(which)) is not None:
            lines.setdefault(p.line, []).append((p.load, xy))
    if not any(len(v) > 1 for v in lines.values()):
        return None
    colours = _colours(list(lines))
    fig = _figure(9.0, 4.2)
    ax = fig.add_subplot()
    for name, line in lines.items():
        line = sorted(line, key=lambda p: load_order(p[0]))
        ax.plot([xy[0] for _, xy in line], [xy[1] for _, xy in line], marker="o",
                color=colours[name], label=name, linewidth=1.4)
        for load, xy in line:
            ax.annotate(load, xy, textcoords="offset points", xytext=(4, 3),
                        fontsize=6.5, color=colours[name])
    best = [xy for p in frontier(points, which) if (xy := p.xy(which)) is not None]
    ax.scatter([x for x, _ in best], [y for _, y in best], s=110,
               facecolors="none", edgecolors="#222222", linewidths=1.0,
               label="Pareto frontier")
    ax.set_xlabel(LATENCY_LABEL[which] + " (lower is better)", fontsize=8)
    ax.set_ylabel("output tokens/s, valid rows (higher is better)", fontsize=8)
    ax.set_title(title or f"Throughput against {LATENCY_LABEL[which]}, per load point",
                 fontsize=10)
    ax.tick_params(labelsize=7)
    _style(ax)
    ax.legend(fontsize=7, loc="best")
    return _png(fig)


def run_pareto(evaluation: Evaluation) -> bytes | None:
    """The Pareto plot of one run's load points (report.html's figure; None for a run
    without two load points of one mode)."""
    return pareto(pareto_points(evaluation))


@dataclass(frozen=True)
class Series:
    """One line of an overlay: x values (numbers or times), the metric, and each
    point's interval (None where it has none)."""

    label: str
    xs: Sequence[float | datetime]
    ys: Sequence[float | None]
    lows: Sequence[float | None] = ()
    highs: Sequence[float | None] = ()


def overlay(series: Sequence[Series], metric: str, xlabel: str,
            title: str = "") -> bytes | None:
    """``metric`` against x for every series, with error bars for the points that have
    an interval; None when no series has a value."""
    drawn = [s for s in series if any(y is not None for y in s.ys)]
    if not drawn:
        return None
    colours = _colours([s.label for s in drawn])
    fig = _figure(9.0, 3.6)
    ax = fig.add_subplot()
    for s in drawn:
        ys = [float("nan") if y is None else y for y in s.ys]
        xs: list[Any] = list(s.xs)
        ax.plot(xs, ys, marker="o", markersize=3.5, color=colours[s.label], label=s.label,
                linewidth=1.2)
        bars: list[tuple[Any, float, float, float]] = [
            (x, y, lo, hi) for x, y, lo, hi in zip(s.xs, s.ys, s.lows, s.highs, strict=False)
                if y is not None and lo is not None and hi is not None]
        if bars:
            ax.errorbar([b[0] for b in bars], [b[1] for b in bars],
                        yerr=[[b[1] - b[2] for b in bars], [b[3] - b[1] for b in bars]],
                        fmt="none", ecolor=colours[s.label], elinewidth=0.8, capsize=2)
    if any(isinstance(x, datetime) for s in drawn for x in s.xs):
        fig.autofmt_xdate()
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(metric, fontsize=8)
    ax.set_title(title or metric, fontsize=10)
    ax.tick_params(labelsize=7)
    _style(ax)
    if len(drawn) <= 12:
        ax.legend(fontsize=7, loc="best")
    return _png(fig)


def load_series(points: Sequence[tuple[str, str, float | None]]) -> list[Series]:
    """(line, load label, value) triples as one series per line, in load order, x the
    load's number (the load points of several runs overlaid)."""
    by: dict[str, list[tuple[str, float | None]]] = {}
    for line, load, value in points:
        by.setdefault(line, []).append((load, value))
    out = []
    for line, pts in by.items():
        pts = sorted((p for p in pts if parse_label(p[0])[1] is not None),
                     key=lambda p: load_order(p[0]))
        out.append(Series(line, [float(parse_label(p[0])[1] or 0.0) for p in pts],
                          [p[1] for p in pts]))
    return out
