"""evaluation.json read back, typed: what the results page, the history and the
across-runs figures take from a run's stored evaluation.

:func:`~kvlab.analysis.evaluate.evaluate` writes evaluation.json from a live
:class:`~kvlab.analysis.evaluate.Evaluation` (which holds the run's validated rows);
:meth:`StoredEvaluation.read` reads the file back into the same analysis types
(:class:`~kvlab.analysis.summaries.Summary`, :class:`~kvlab.analysis.load.LoadSummary`,
:class:`~kvlab.analysis.validate.Violation`, ...) without the rows. Files of every
schema version on disk read: :func:`kvlab.rundir.evaluation.migrate` brings an older
layout to the current one first, and is the one place that tolerates a missing key. A
file that still does not read raises :class:`EvaluationFileError`, one line naming the
file and the key.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from kvlab.analysis.evaluate import SCHEMA_VERSION
from kvlab.analysis.intervals import Interval
from kvlab.analysis.load import LoadSummary
from kvlab.analysis.metric import DIST, VALUE
from kvlab.analysis.percentiles import Distribution
from kvlab.analysis.prefix_reuse import PrefixReuse
from kvlab.analysis.summaries import Summary
from kvlab.analysis.summary_metrics import SUMMARY_METRICS
from kvlab.analysis.valid_rows import RowCount
from kvlab.analysis.validate import Reason, Violation
from kvlab.rundir.evaluation import EvaluationFileError, migrate, read_evaluation, unreadable

Json = dict[str, Any]
_UNKEPT = {f.name: None for f in fields(Distribution)} | {"count": 0}


def _interval(data: Json | None) -> Interval | None:
    return None if data is None else Interval(float(data["low"]), float(data["high"]),
                                              float(data["confidence"]), str(data["method"]))


def summary_of(data: Json) -> Summary:
    """A :class:`Summary` as evaluation.json keeps it: a metric's distribution where the
    file keeps it whole (count 0: no row had the metric, as :meth:`Summary.dist` writes
    it), else the statistics it keeps (the others None, count 0: not kept)."""
    metrics: dict[str, Distribution] = {}
    figures: dict[str, float | None] = {}
    for metric in SUMMARY_METRICS:
        kept: dict[str, Any] = {}  # the statistics the file keeps of a metric
        for key, stat in metric.keys:
            if key not in data:
                continue
            if stat == DIST:
                kept = {**data[key], **kept}
            elif stat == VALUE:
                figures[metric.name] = data[key]
            else:
                kept[stat] = data[key]
        count = kept.pop("count", 0)
        if count or any(v is not None for v in kept.values()):
            metrics[metric.name] = Distribution(**{**_UNKEPT, **kept, "count": count})
    return Summary(str(data["mode"]), int(data["capacity"]), data["load"],
                   RowCount.from_dict(data["valid"]), metrics, figures,
                   {k: _interval(i) for k, i in data["mean_intervals"].items()})


def load_point_of(data: Json) -> LoadSummary:
    """A :class:`LoadSummary` as evaluation.json keeps it."""
    names = {f.name for f in fields(LoadSummary)}
    return LoadSummary(**{**{k: v for k, v in data.items() if k in names},
                          "count": RowCount.from_dict(data["count"])})


def violation_of(data: Json) -> Violation:
    return Violation(str(data["mode"]), int(data["capacity"]), str(data["query_id"]),
                     int(data["repetition"]), Reason(data["reason"]), str(data["detail"]),
                     data["other_mode"], data["load"])


def reuse_of(data: Json) -> PrefixReuse:
    names = {f.name for f in fields(PrefixReuse)}
    return PrefixReuse(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True)
class Ratio:
    """One compared metric of a strict comparison: means (ms), A/B, its 95 % interval
    and verdict (None: not computed)."""

    mean_a: float | None
    mean_b: float | None
    ratio: float | None
    reduction: float | None
    interval: Interval | None
    verdict: str | None

    @classmethod
    def of(cls, data: Json) -> Ratio:
        return cls(data["mean_a"], data["mean_b"], data["ratio"], data["reduction"],
                   _interval(data["interval"]), data["verdict"])


@dataclass(frozen=True)
class StoredComparison:
    """A strict comparison of A and B at one capacity and load (``status`` ok or
    refused, with its reasons)."""

    a: str
    b: str
    capacity: int
    load: str | None
    status: str
    reasons: tuple[str, ...]
    metrics: dict[str, Ratio]

    @classmethod
    def of(cls, data: Json) -> StoredComparison:
        return cls(str(data["a"]), str(data["b"]), int(data["capacity"]), data["load"],
                   str(data["status"]), tuple(data["reasons"]),
                   {k: Ratio.of(v) for k, v in data["metrics"].items()})


@dataclass(frozen=True)
class StoredPair:
    """An interval comparison's cell and what each side stands on."""

    mode_a: str
    mode_b: str
    capacity: int
    load: str | None
    count_a: RowCount
    count_b: RowCount

    @classmethod
    def of(cls, data: Json) -> StoredPair:
        return cls(str(data["mode_a"]), str(data["mode_b"]), int(data["capacity"]),
                   data["load"], RowCount.from_dict(data["count_a"]),
                   RowCount.from_dict(data["count_b"]))


@dataclass(frozen=True)
class StoredEvaluation:
    """evaluation.json, typed. ``counts``: the run's row counts by name (records,
    warmup, measured, ...); ``valid``: n valid of m over the whole run."""

    schema_version: int
    run_id: str
    experiment: str
    counts: dict[str, Any]
    valid: RowCount
    summaries: tuple[Summary, ...]
    load: tuple[LoadSummary, ...]
    comparisons: tuple[StoredComparison, ...]
    pairs: tuple[StoredPair, ...]
    violations: tuple[Violation, ...]
    prefix_reuse: tuple[PrefixReuse, ...]

    @property
    def counts_refused_rows(self) -> bool:
        """True for a file of schema 1, whose load figures counted refused rows."""
        return self.schema_version < 2

    @property
    def current(self) -> bool:
        """Written in this kvlab's layout (:data:`SCHEMA_VERSION`)."""
        return self.schema_version == SCHEMA_VERSION

    def summary(self, mode: str, capacity: int, load: str | None = None) -> Summary | None:
        """The summary of (mode, capacity, load); ``load`` None: the sequential one."""
        return next((s for s in self.summaries
                     if (s.mode, s.capacity, s.load) == (mode, capacity, load)), None)

    def pair(self, a: str, b: str, capacity: int, load: str | None) -> StoredPair | None:
        return next((p for p in self.pairs
                     if (p.mode_a, p.mode_b, p.capacity, p.load) == (a, b, capacity, load)),
                    None)

    @classmethod
    def from_dict(cls, data: Json) -> StoredEvaluation:
        """From evaluation.json's data of any version (KeyError, TypeError or
        ValueError when it lacks what the current layout needs)."""
        d: Json = migrate(data)
        return cls(d["schema_version"], str(d["run_id"]), str(d["experiment"]), d["counts"],
                   RowCount.from_dict(d["valid"]),
                   tuple(summary_of(s) for s in d["summaries"]),
                   tuple(load_point_of(p) for p in d["load"]),
                   tuple(StoredComparison.of(c) for c in d["comparisons"]),
                   tuple(StoredPair.of(p) for p in d["intervals"]["pairs"]),
                   tuple(violation_of(v) for v in d["violations"]),
                   tuple(reuse_of(p) for p in d["prefix_reuse"]))

    @classmethod
    def read(cls, path: Path) -> StoredEvaluation:
        """The evaluation.json at ``path``; EvaluationFileError (one line) when it is
        missing or does not read."""
        data = read_evaluation(path)
        try:
            return cls.from_dict(data)
        except (ValueError, KeyError, TypeError) as exc:
            raise unreadable(path, exc) from None


__all__ = ["EvaluationFileError", "StoredEvaluation", "migrate"]
