"""Run a capacity search (``[search]``): rate points picked one after another by bisection.

For one (mode, capacity) whose server is up, :func:`search_capacity` asks
:func:`~kvlab.analysis.capacity.next_rate` for a rate, has it measured
``repetitions`` times as rate points of ``[load]`` (labels ``rate=R#1``, ``rate=R#2``,
..., each repetition with its own arrival seed), judges it
(:func:`~kvlab.analysis.capacity.judge_rate` on the points' validated rows:
slipped points excluded, a rate with more refused rows than ``max_refused`` allows
missed, objectives over the valid rows of the rest; the server's counters are read into
the verdicts by the evaluation, not here) and goes on until the search is over. The
answer and its interval are computed from the records by the run's evaluation, so a
report rebuilt later finds the same one. A resumed search reuses the points already
completed and continues.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from kvlab.analysis.capacity import Probe, judge_rate, next_rate
from kvlab.analysis.valid_rows import current_rows, judge
from kvlab.bench.plan.loads.base import LoadStrategy
from kvlab.run.runplan import Search
from kvlab.rundir import Record, RunState
from kvlab.store.evaluation import objectives_of

SEARCH_DONE = "search"  # the state's points_done label of a finished search

Measure = Callable[[LoadStrategy], Awaitable[list[Record]]]


async def search_capacity(step: Search, measure: Measure, records: Sequence[Record],
                          state: RunState, note: Callable[[str], None]) -> list[Probe]:
    """Search the highest rate meeting the objectives of ``step``, measuring each point
    with ``measure`` (points already done in ``state`` are judged on their ``records``);
    returns the rates tried, in order. The caller enters the search as done."""
    mode, capacity, load = step.mode, step.capacity, step.load
    objectives, plan = objectives_of(step.search, step.slo)
    earlier: dict[str, list[Record]] = {}
    for row in current_rows(records):
        if row.mode == mode and row.capacity == capacity and row.load is not None:
            earlier.setdefault(row.load, []).append(row)
    probes: list[Probe] = []
    while (rate := next_rate(probes, plan)) is not None:
        by_point: dict[str, list[Record]] = {}
        for k in range(1, step.search.repetitions + 1):
            point = load.probe(rate, step.requests, repetition=k)
            label = point.label or ""  # a rate point always has one
            if state.point_done(mode, capacity, label):
                by_point[label] = earlier.get(label, [])
            else:
                by_point[label] = await measure(point)
        probe, _ = judge_rate(rate, {label: judge(rows) for label, rows in by_point.items()},
                              objectives, load.slip_threshold_ms, plan.max_refused)
        probes.append(probe)
        verdict = {True: "met", False: "missed", None: "undecided (every point slipped)"}
        why = (f" ({probe.count.describe()}: too many refused)" if probe.refused_miss
               else f" ({probe.count.describe()})")
        note(f"{mode} @ {capacity}: {rate:g} req/s {verdict[probe.met]} the objectives{why}")
    return probes
