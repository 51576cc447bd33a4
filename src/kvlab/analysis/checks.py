"""The registry of checks: each analysis that adds one list to the Evaluation.

:func:`~kvlab.analysis.evaluate.evaluate` runs every check of :data:`CHECKS`, in this
order (evaluation.json keeps their lists in the same order, after the core's); the
report sections that render them read ``evaluation.found(CHECK)``. A new analysis is
a module with its :class:`~kvlab.analysis.check.Check`, a line here, its report
section and a line in :mod:`kvlab.report.sections`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kvlab.analysis.check import Check, Finding, Judged, not_measured_line
from kvlab.analysis.knee_check import CellKey, KneeCheck, knee_checks
from kvlab.analysis.process_memory import PointMemory, point_memory
from kvlab.analysis.reasoning import ReasoningCell, reasoning_cells
from kvlab.analysis.server_histograms import PointHistograms, point_histograms
from kvlab.analysis.sessions import SessionsCell, session_cells
from kvlab.analysis.step_floor import PointStep, point_steps
from kvlab.analysis.trace_hits import PointHits, trace_hits
from kvlab.rundir import point_spans

__all__ = ["CHECKS", "KNEE", "PROCESS_MEMORY", "REASONING", "SERVER_HISTOGRAMS",
           "SESSIONS", "STEP_FLOOR", "TRACE_HITS"]


def _at(cell: CellKey) -> str:
    return f"{cell[0]} @ {cell[1]}"


def _loaded(judged: Judged) -> set[CellKey]:
    """The (mode, capacity) cells with load points (a sequential run has none)."""
    return {(s.mode, s.capacity) for s in judged.loads if s.load is not None}


def _by_kind(judged: Judged, lacks: str, places: Iterable[tuple[CellKey, str]]) -> list[str]:
    """One line per server kind that exposes no ``lacks``, naming where (its places:
    a cell and what of it, in order)."""
    kinds: dict[str, list[str]] = {}
    for cell, where in places:
        kinds.setdefault(judged.view.servers.get(cell, ""), []).append(where)
    return [not_measured_line(kind or None, lacks, ", ".join(wheres))
            for kind, wheres in kinds.items()]


def _unbudgeted(judged: Judged, cells: set[CellKey]) -> list[str]:
    """A line per kind of launched server of ``cells`` that recorded no KV budget, and
    one per cell whose recorded budget or counters' names cannot be read."""
    view = judged.view
    return _by_kind(judged, "KV budget",
                    ((cell, _at(cell)) for cell in view.servers
                     if cell in cells and cell not in view.budgets
                     and cell not in view.unreadable)) + _unreadable(judged, cells)


def _unreadable(judged: Judged, cells: set[CellKey]) -> list[str]:
    """A line per cell of ``cells`` whose server recorded what cannot be read."""
    view = judged.view
    return [f"not measured: {view.servers.get(cell) or 'the server'} recorded what kvlab "
            f"cannot read ({_at(cell)}: {why})"
            for cell, why in view.unreadable.items() if cell in cells]


def _uncounted(judged: Judged, cells: set[CellKey]) -> list[str]:
    """A line per kind of launched server of ``cells`` whose load points have no
    counters: its kind recorded no metric names and kvlab knows none of its readings."""
    counted = {(c.mode, c.capacity) for c in judged.counters}
    return _by_kind(judged, "/metrics counters kvlab reads",
                    ((cell, _at(cell)) for cell in judged.view.servers
                     if cell in cells and cell not in counted))


@dataclass(frozen=True)
class ServerHistograms:
    """The server's request histograms per load point beside the client's view."""

    key: str = "server_histograms"

    def run(self, judged: Judged) -> list[PointHistograms]:
        return point_histograms(judged.view.records, judged.view.gauges)

    def not_measured(self, judged: Judged) -> list[str]:
        found = {(p.mode, p.capacity, p.load) for p in self.run(judged)}
        return _by_kind(judged, "request histograms",
                        (((s.mode, s.capacity), f"{_at((s.mode, s.capacity))} {s.load}")
                         for s, _ in point_spans(judged.view.gauges)
                         if s.load is not None and (s.mode, s.capacity) in judged.view.servers
                         and (s.mode, s.capacity, s.load) not in found))


@dataclass(frozen=True)
class StepFloor:
    """Per load point, the served ITL beside the server's own step and the floor."""

    key: str = "step_floor"

    def run(self, judged: Judged) -> list[PointStep]:
        return point_steps(judged.view.records, judged.view.gauges)

    def not_measured(self, judged: Judged) -> list[str]:
        found = {(p.mode, p.capacity, p.load) for p in self.run(judged)}
        return _by_kind(judged, "step or inter-token histograms",
                        (((s.mode, s.capacity), f"{_at((s.mode, s.capacity))} {s.load}")
                         for s, _ in point_spans(judged.view.gauges)
                         if s.load is not None and (s.mode, s.capacity) in judged.view.servers
                         and (s.mode, s.capacity, s.load) not in found))


@dataclass(frozen=True)
class Reasoning:
    """TTFT and the first answer token of the cells that streamed reasoning."""

    key: str = "reasoning"

    def run(self, judged: Judged) -> list[ReasoningCell]:
        return reasoning_cells(judged.valid)

    def not_measured(self, judged: Judged) -> list[str]:
        return []  # read from the client's own stream: every server kind


@dataclass(frozen=True)
class Knee:
    """The concurrency knee a launched server's KV budget predicts against the one its
    counters show."""

    key: str = "knee"

    def run(self, judged: Judged) -> list[KneeCheck]:
        return knee_checks(judged.view.budgets, judged.valid, judged.summaries,
                           judged.loads, judged.counters, judged.view.gauges,
                           judged.view.servers)

    def not_measured(self, judged: Judged) -> list[str]:
        return _unbudgeted(judged, _loaded(judged)) + _uncounted(judged, _loaded(judged))


@dataclass(frozen=True)
class ProcessMemory:
    """A launched server's resident memory per load point against its KV and weights."""

    key: str = "process_memory"

    def run(self, judged: Judged) -> list[PointMemory]:
        view = judged.view
        return point_memory(view.memory, view.budgets, view.weights, view.gauges)

    def not_measured(self, judged: Judged) -> list[str]:
        sampled = {(m.mode, m.capacity) for m in judged.view.memory}
        return _by_kind(judged, "process tree to sample",
                        ((cell, _at(cell)) for cell in judged.view.servers
                         if cell in _loaded(judged) and cell not in sampled)) \
            + _unbudgeted(judged, sampled & _loaded(judged))  # RSS, but no KV or rest


@dataclass(frozen=True)
class TraceHits:
    """A replayed trace's prefix-cache hits predicted against those the server counted."""

    key: str = "trace_hits"

    def run(self, judged: Judged) -> list[PointHits]:
        view = judged.view
        return trace_hits(view.budgets, view.records, view.trace, judged.counters,
                          view.gauges)

    def not_measured(self, judged: Judged) -> list[str]:
        traced = {(r.mode, r.capacity) for r in judged.view.records
                  if (r.capacity, r.query_id) in judged.view.trace}
        return _unbudgeted(judged, traced) + _uncounted(judged, traced)


@dataclass(frozen=True)
class Sessions:
    """A sessions load by turn index and per session, against its plan."""

    key: str = "sessions"

    def run(self, judged: Judged) -> list[SessionsCell]:
        return session_cells(judged.valid, judged.view.sessions)

    def not_measured(self, judged: Judged) -> list[str]:
        return []  # read from the records and prepared.json: every server kind


SERVER_HISTOGRAMS = ServerHistograms()
STEP_FLOOR = StepFloor()
REASONING = Reasoning()
KNEE = Knee()
PROCESS_MEMORY = ProcessMemory()
TRACE_HITS = TraceHits()
SESSIONS = Sessions()

CHECKS: tuple[Check[Finding], ...] = (
    SERVER_HISTOGRAMS,
    STEP_FLOOR,
    REASONING,
    KNEE,
    PROCESS_MEMORY,
    TRACE_HITS,
    SESSIONS,
)
