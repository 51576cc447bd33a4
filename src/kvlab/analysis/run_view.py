"""The typed view of a run that :func:`~kvlab.analysis.evaluate.evaluate` reads.

:class:`RunView` is everything one evaluation takes from a run, built once from its
directory (:func:`kvlab.store.evaluation.view_of`) or, in a test, from records by hand:
the records, what the experiment asks (pairs, mode order, SLOs, search), what the run
recorded beside its rows (the server's ``/metrics`` readings, process memory, each
launched server's KV budget, weights' bytes and kind) and what prepared.json planned
(multi-turn rows, session turns, trace blocks). :class:`EvaluateOptions` are how to
judge it (bootstrap resamples, strict counters), not facts of the run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kvlab.analysis.capacity import Objectives, SearchPlan
from kvlab.analysis.knee_check import CellKey
from kvlab.analysis.load import DEFAULT_SLIP_THRESHOLD_MS, Slo
from kvlab.analysis.saturation import Calibration
from kvlab.analysis.session_turns import PlannedTurn
from kvlab.analysis.trace_hits import TraceBlocks
from kvlab.analysis.turns import TurnPlan
from kvlab.analysis.valid_rows import CellPlan, GroupKey
from kvlab.errors import KvlabError
from kvlab.memory.served import ServedKv
from kvlab.metric_names import MetricNames
from kvlab.rundir import GaugeSample, MemorySample, Record, ServerFacts

__all__ = ["EvaluateOptions", "Recorded", "RunView", "recorded_servers"]


@dataclass(frozen=True)
class RunView:
    """A run as its evaluation reads it.

    ``records``: every record, warm-ups included; ``compare_pairs``: the experiment's
    pairs (empty: every pair of modes, none strict); ``mode_order``: the experiment's
    modes in order; ``slo`` and ``slip_threshold_ms`` (ms) judge load points;
    ``calibration``: the client's limits (None: uncalibrated) for ``workers`` load
    workers; ``definition_sets``: other tools' sets evaluation.json keeps; ``order`` and
    ``repeat_aa``: the run's, kept as they are; ``gauges``: the ``/metrics`` readings;
    ``turns``, ``sessions`` and ``trace``: prepared.json's multi-turn rows, session
    turns and trace blocks; ``search``: the ``[search]``'s objectives and plan;
    ``budgets``, ``weights`` and ``servers``: per (mode, capacity), the launched
    server's KV budget, weights' bytes and kind (``facts()["kind"]``);
    ``metric_names``: the names its kind gave its /metrics counters; ``unreadable``: what
    a server recorded that cannot be read (a check says so); ``memory``: the
    server's process-tree samples; ``plan``: each cell's planned rows and completion
    (every count then reads "n valid of m planned"; empty for a run without a plan)."""

    records: Sequence[Record]
    compare_pairs: Sequence[tuple[str, str]] = ()
    run_id: str = ""
    experiment: str = ""
    mode_order: Sequence[str] = ()
    slo: Slo | None = None
    slip_threshold_ms: float = DEFAULT_SLIP_THRESHOLD_MS
    # the share of a point's median TTFT its client error may take (analysis.client_error)
    client_error_limit: float = 0.05
    calibration: Calibration | Mapping[str, Any] | None = None
    definition_sets: Sequence[str] = ()
    order: Mapping[str, Any] | None = None
    repeat_aa: str | None = None
    workers: int | None = None
    gauges: Sequence[GaugeSample] = ()
    turns: Sequence[TurnPlan] = ()
    sessions: Sequence[PlannedTurn] = ()
    search: tuple[Objectives, SearchPlan] | None = None
    budgets: Mapping[CellKey, ServedKv] = field(default_factory=dict)
    weights: Mapping[CellKey, int] = field(default_factory=dict)
    memory: Sequence[MemorySample] = ()
    trace: Mapping[tuple[int, str], TraceBlocks] = field(default_factory=dict)
    servers: Mapping[CellKey, str] = field(default_factory=dict)
    metric_names: Mapping[CellKey, MetricNames] = field(default_factory=dict)
    unreadable: Mapping[CellKey, str] = field(default_factory=dict)
    plan: Mapping[GroupKey, CellPlan] = field(default_factory=dict)


@dataclass(frozen=True)
class EvaluateOptions:
    """How to judge a run: ``resamples``, the bootstrap's (intervals; the capacity
    search takes at most 1000); ``strict``: a point whose server counters disagree with
    its records is refused, not only flagged."""

    resamples: int = 2000
    strict: bool = False


@dataclass(frozen=True)
class Recorded:
    """What the launched servers' kinds recorded in the manifest, per (mode, capacity):
    the KV budget, the weights' bytes, the names of their /metrics counters, and what of
    it could not be read (why, in words)."""

    budgets: dict[CellKey, ServedKv] = field(default_factory=dict)
    weights: dict[CellKey, int] = field(default_factory=dict)
    metric_names: dict[CellKey, MetricNames] = field(default_factory=dict)
    unreadable: dict[CellKey, str] = field(default_factory=dict)


def recorded_servers(entries: Iterable[tuple[CellKey, ServerFacts | None]]) -> Recorded:
    """Per (mode, capacity), from its launched server's facts (the manifest, typed): the
    KV budget its kind recorded (``kv_served``: None, it exposes none), the weights'
    bytes (``weights_bytes``) and its counters' names (``metric_names``; None in a run
    recorded before kinds recorded them: the analysis recognises known names by the
    readings). A later entry of a cell wins where it recorded one (a resume starts it
    again). A value that cannot be read is never dropped silently: its cell's
    :attr:`Recorded.unreadable` says why, and the checks that need it say so."""
    out = Recorded()
    for cell, facts in entries:
        if facts is None:  # an external endpoint records no facts
            continue
        problems = []
        if facts.kv_served is not None:
            try:
                out.budgets[cell] = ServedKv.from_dict(facts.kv_served)
            except KvlabError as exc:
                problems.append(f"kv_served: {exc}")
        if facts.metric_names is not None:
            try:
                out.metric_names[cell] = MetricNames.from_dict(facts.metric_names)
            except ValueError as exc:
                problems.append(f"metric_names: {exc}")
        if facts.weights_bytes is not None:
            out.weights[cell] = facts.weights_bytes
        if problems:
            out.unreadable[cell] = "; ".join(problems)
        else:
            out.unreadable.pop(cell, None)
    return out
