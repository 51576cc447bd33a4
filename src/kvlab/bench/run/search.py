"""Run a capacity search (``[search]``): rate points picked one after another by bisection.

For one (mode, capacity) whose server is up, :func:`search_capacity` asks
:func:`~kvlab.bench.analysis.capacity.next_rate` for a rate, runs it ``repetitions``
times as load points of ``[load]`` (labels ``rate=R#1``, ``rate=R#2``, ..., each
repetition with its own arrival seed), judges it
(:func:`~kvlab.bench.analysis.capacity.judge_rate` on the points' validated rows:
slipped points excluded, a rate with more refused rows than ``max_refused`` allows
missed, objectives over the valid rows of the rest; the server's counters are read into
the verdicts by the evaluation, not here) and goes on until the search is over. The
answer and its interval are computed from the records by the run's evaluation, so a
report rebuilt later finds the same one. A resumed search reuses the points already
completed and continues.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvlab.bench.analysis.capacity import Probe, judge_rate, next_rate
from kvlab.bench.analysis.valid_rows import current_rows, judge
from kvlab.bench.client.endpoints import Endpoint
from kvlab.bench.plan.workload import PreparedPrompt
from kvlab.bench.records import Record
from kvlab.bench.store.evaluation import search_of
from kvlab.experiment import Mode
from kvlab.servers.base import Server

if TYPE_CHECKING:
    from kvlab.bench.run.sessions import Session

SEARCH_DONE = "search"  # the state's points_done label of a finished search


async def search_capacity(session: Session, mode: Mode, capacity: int, endpoint: Endpoint,
                          prompts: dict[str, PreparedPrompt], server: Server | None
                          ) -> list[Probe]:
    """Search the highest rate meeting the objectives on this mode's server; returns the
    rates tried, in order, and enters the search as done in the run's state."""
    experiment = session.experiment
    found = search_of(experiment)
    assert experiment.search is not None and found is not None
    objectives, plan = found
    load = experiment.load
    requests = len(session.queries) * experiment.workload.repetitions
    earlier: dict[str, list[Record]] = {}
    for row in current_rows(session.run.records):
        if row.mode == mode.name and row.capacity == capacity and row.load is not None:
            earlier.setdefault(row.load, []).append(row)
    probes: list[Probe] = []
    while (rate := next_rate(probes, plan)) is not None:
        by_point: dict[str, list[Record]] = {}
        for k in range(1, experiment.search.repetitions + 1):
            point = load.probe(rate, requests, repetition=k)
            label = point.label or ""  # a rate point always has one
            if session.state.point_done(mode.name, capacity, label):
                by_point[label] = earlier.get(label, [])
            else:
                by_point[label] = await session.run_load_point(
                    mode, capacity, endpoint, prompts, server, point)
        probe, _ = judge_rate(rate, {label: judge(rows) for label, rows in by_point.items()},
                              objectives, load.slip_threshold_ms, plan.max_refused)
        probes.append(probe)
        verdict = {True: "met", False: "missed", None: "undecided (every point slipped)"}
        why = (f" ({probe.count.describe()}: too many refused)" if probe.refused_miss
               else f" ({probe.count.describe()})")
        session.reporter.note(f"{mode.name} @ {capacity}: {rate:g} req/s "
                              f"{verdict[probe.met]} the objectives{why}")
    session.mark_done(mode, capacity, SEARCH_DONE)
    return probes
