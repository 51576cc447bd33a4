"""The one summary of a group of rows: distributions, means with intervals, rates.

A *group* is one (mode, capacity, load) cell; ``load`` is the row's load point
(``c=8``, ``rate=4.0``) or None for a sequential run, so the points of a load sweep are
never averaged together. A summary reads a group's
:class:`~kvlab.analysis.valid_rows.ValidRows` (validation's accepted rows, the
refused ones counted by class) and says what it stands on: "n valid of m". Every
number comes from the declared metrics (their row functions are
:mod:`kvlab.analysis.metrics`) and the statistics of
:mod:`kvlab.analysis.stats`.

evaluation.json, report.md, report.html, summaries.csv and the plots all read these
:class:`Summary` objects; which metrics a summary holds, and under which names each
view shows them, is declared once in :mod:`kvlab.analysis.summary_metrics`. The
other views of the same rows answer other questions: what a load point achieved
(:mod:`~kvlab.analysis.load`) and the metrics under other tools' definitions
(:mod:`~kvlab.analysis.definitions`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kvlab.analysis.metric import DIST, VALUE, Metric
from kvlab.analysis.stats import Distribution, Interval, bootstrap_ci, describe
from kvlab.analysis.summary_metrics import DISTRIBUTED, SUMMARY_METRICS
from kvlab.analysis.valid_rows import RowCount, ValidRows
from kvlab.labels import load_order, parse_label
from kvlab.rundir import Record

# ------------------------------------------------------------------------------ groups


def load_value(load: str | None) -> float | None:
    """The number in a load label ("c=8" -> 8.0); None for sequential or unparsable."""
    return parse_label(load)[1]


def modes_in_order(records: Iterable[Record]) -> list[str]:
    """Mode names in their order of first appearance."""
    return list(dict.fromkeys(r.mode for r in records))


# ---------------------------------------------------------------------------- summary


@dataclass
class Summary:
    """One (mode, capacity, load) cell over its valid rows; ``count``: n valid of m
    measured, the refused ones by class.

    ``metrics`` holds the distribution of every row or pooled metric that has a value,
    ``figures`` every group figure (None: not known), ``mean_intervals`` the bootstrap
    95 % interval of the mean of each interval metric (None: too few values); the
    metrics are :data:`~kvlab.analysis.summary_metrics.SUMMARY_METRICS`.
    """

    mode: str
    capacity: int
    load: str | None  # load point label; None: sequential
    count: RowCount  # what the figures stand on
    metrics: dict[str, Distribution]
    figures: dict[str, float | None]
    mean_intervals: dict[str, Interval | None]

    @property
    def queries(self) -> int:
        """Valid rows aggregated."""
        return self.count.valid

    @property
    def refused(self) -> int:
        """Rows validation left out."""
        return self.count.measured - self.count.valid

    @property
    def rows(self) -> int:
        """Measured rows: valid plus refused."""
        return self.count.measured

    def mean(self, name: str) -> float | None:
        """The mean of one row or pooled metric; None when no row has it."""
        dist = self.metrics.get(name)
        return dist.mean if dist else None

    def figure(self, name: str) -> float | None:
        """One group figure (``tokens_per_second``, ``system_tokens_per_s``, ...)."""
        return self.figures.get(name)

    def dist(self, name: str) -> dict[str, Any]:
        """The distribution of one metric as a dict (count 0 when no row has it)."""
        return (self.metrics.get(name) or describe([])).to_dict()

    def stat(self, metric: Metric, stat: str) -> float | None:
        """One statistic of a metric (:data:`~kvlab.analysis.metric.VALUE`: a
        group figure); None when unknown."""
        if stat == VALUE:
            return self.figures.get(metric.name)
        dist = self.metrics.get(metric.name)
        value = getattr(dist, stat) if dist else None
        return None if value is None else float(value)

    def to_json(self) -> dict[str, Any]:
        """The summary as evaluation.json holds it: each metric under its keys."""
        out: dict[str, Any] = {
            "mode": self.mode, "capacity": self.capacity, "load": self.load,
            "queries": self.queries, "refused": self.refused, "valid": self.count.to_dict(),
        }
        for metric in SUMMARY_METRICS:
            for key, stat in metric.keys:
                out[key] = self.dist(metric.name) if stat == DIST else self.stat(metric, stat)
        out["mean_intervals"] = {k: (i.to_dict() if i else None)
                                 for k, i in self.mean_intervals.items()}
        return out


def summarize(valid: ValidRows, *, resamples: int = 2000) -> Summary:
    """Aggregate the valid rows of one (mode, capacity, load) group (one of
    :meth:`ValidRows.groups`); ValueError for a group without a measured row."""
    if not valid.sent:
        raise ValueError("summarize needs a group with at least one measured row")
    first, rows = valid.sent[0], valid.rows
    dists: dict[str, Distribution] = {}
    cis: dict[str, Interval | None] = {}
    for metric in DISTRIBUTED:
        vals = metric.values(rows)
        if not vals:
            continue
        dists[metric.name] = describe(vals)
        if metric.interval:
            cis[metric.name] = bootstrap_ci(vals, "mean", resamples=resamples)
    figures = {x.name: x.group(valid) for x in SUMMARY_METRICS if x.group is not None}
    return Summary(mode=first.mode, capacity=first.capacity, load=first.load,
                   count=valid.count, metrics=dists, figures=figures, mean_intervals=cis)


def report_order(summaries: Sequence[Summary]) -> list[Summary]:
    """Capacity, then load, then mode (in the order the modes first appear): how the
    reports list summaries, as :meth:`ValidRows.groups` orders rows."""
    modes = {m: i for i, m in enumerate(dict.fromkeys(s.mode for s in summaries))}
    return sorted(summaries, key=lambda s: (s.capacity, load_order(s.load), modes[s.mode]))


def summarize_run(valid: ValidRows, *, resamples: int = 2000) -> list[Summary]:
    """One summary per (mode, capacity, load), in report order (see
    :meth:`ValidRows.groups`)."""
    return [summarize(group, resamples=resamples) for group in valid.groups().values()]
