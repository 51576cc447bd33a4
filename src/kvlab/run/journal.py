"""A run directory being written: its state in memory, its one writer, its positions.

The executor records everything a run does through one :class:`Journal`: each Record as
it lands (appended through the run's one writer, off the event loop), each server's
time up, each load point done, each invocation (a run or a resume), each
sharded point's worker clocks. The state (:class:`~kvlab.store.state.RunState`)
is kept in memory and saved on every change; :meth:`Journal.close` syncs every record
to the disk and saves the state a last time (every exit path calls it).
"""

from __future__ import annotations

from typing import Any

from kvlab.records import Record, RunClock
from kvlab.run.reporter import Reporter
from kvlab.run.rundir import now_iso
from kvlab.run.runplan import RunPlan
from kvlab.servers.preflight import load_average
from kvlab.store.rundir import RunDir
from kvlab.store.state import InvocationEntry, PointClocks, ServerEntry
from kvlab.store.writer import RunWriter


class Journal:
    """The live side of one invocation over a run directory."""

    def __init__(self, run: RunDir, reporter: Reporter) -> None:
        self.run = run
        self.reporter = reporter
        self.state = run.state  # owned here, in memory; saved through self.writer
        self.position = max((r.position for r in run.records), default=-1) + 1
        self.written = 0
        self.clock = RunClock()
        self.writer = RunWriter(run.path)  # the run's one writer, until close()

    def take(self, n: int) -> int:
        """The first of ``n`` run positions for the next requests."""
        first, self.position = self.position, self.position + n
        return first

    def land(self, record: Record) -> None:
        """Append one Record (progress counts a measured one)."""
        self.writer.append(record)
        self.written += 1
        if not record.warmup:
            self.reporter.advance(record)

    def save(self) -> None:
        self.writer.save(self.state)

    def mark_done(self, mode: str, capacity: int, label: str) -> None:
        """Enter a load point (or a whole search) as completed."""
        done = self.state.points_done = self.state.points_done or []
        done.append((mode, capacity, label))
        self.save()

    def point_clocks(self, mode: str, capacity: int, label: str,
                     clocks: list[dict[str, Any]]) -> None:
        """The clocks of a sharded point's workers, saved before the point starts."""
        kept = self.state.worker_clocks = self.state.worker_clocks or []
        kept.append(PointClocks(mode=mode, capacity=capacity, load=label, clocks=clocks))
        self.save()

    def server_up(self, mode: str, capacity: int) -> ServerEntry:
        """A server's entry, started now (entered by :meth:`server_down`)."""
        return ServerEntry(mode=mode, capacity=capacity, started=now_iso())

    def server_down(self, entry: ServerEntry, facts: dict[str, Any] | None) -> None:
        """Enter a server as stopped, with what it says of itself (None: external)."""
        entry.facts = facts
        entry.stopped = now_iso()
        self.state.servers.append(entry)
        self.save()

    def begin_invocation(self, plan: RunPlan, workers: dict[str, Any] | None) -> InvocationEntry:
        """Enter this invocation: its modes, blocks, order and load workers."""
        order = [(b.mode, b.capacity) for b in plan.blocks]
        entry = InvocationEntry(started=now_iso(), load_average_started=load_average(),
                                modes=sorted({b.mode for b in plan.blocks},
                                             key=[m.name for m in plan.modes].index),
                                order=order, run_order=plan.order_facts(), workers=workers)
        self.state.invocations.append(entry)
        self.state.run_order += order
        self.state.order = entry.run_order  # the order actually used, last invocation
        if self.state.rows_planned is None and not self.state.invocations[:-1]:
            self.state.rows_planned = plan.rows_planned()  # a new run's whole plan
        self.save()
        return entry

    def end_invocation(self, entry: InvocationEntry) -> None:
        """Enter this invocation as stopped."""
        entry.stopped = now_iso()
        entry.load_average_stopped = load_average()
        self.save()

    def close(self) -> None:
        """Save the state, sync every record to the disk, stop the writer."""
        try:
            self.save()
        finally:
            self.writer.close()
