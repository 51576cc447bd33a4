"""The mechanics of load points: deadlines on the run's clock, the sequential, closed and
open loops every load strategy (:mod:`kvlab.bench.plan.loads`) is made of, and the
shares of a point that load workers run.

- sequential: one request after the other; ``t_scheduled`` is when the previous one
  returned.
- closed loop (``run_closed_loop``): N users; each sends its next request as soon as
  its previous one returned, so at most N requests are ever in flight. ``t_scheduled``
  is the moment the user was free to send.
- open loop (``run_open_loop``): each request leaves at its own deadline, whatever the
  server does; an optional ``max_concurrency`` caps requests in flight: an arrival that
  finds the cap full waits, and leaves late. ``t_scheduled`` is the deadline.

Precision: arrivals are absolute deadlines on the run's :class:`RunClock` (offsets from
the point's start), never relative sleeps, so one late wake-up does not push every
later request. The wait sleeps to just before the deadline, then yields to the event
loop until it is reached (sub-millisecond without spinning a core for long). A request
that leaves late keeps its lateness in ``t_sent - t_scheduled``; :mod:`kvlab.analysis.load`
measures and flags it — it is never hidden by re-basing the schedule.

Public API::

    point = RatePoint(rate=4.0, requests=20, arrival="poisson")   # bench.plan.loads.rate
    records = await run_point(point, specs, send, clock, on_record=store.append)

``specs`` are the requests to make (their ``load`` and ``t_scheduled`` are filled here);
``send(spec) -> Record`` sends one and never raises (``HarnessClient.send`` bound to an
endpoint and clock). Records come back in completion order.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from kvlab.bench.client.endpoints import RequestSpec
from kvlab.bench.client.gcpause import paused_gc
from kvlab.bench.plan.loads.base import PointShare, RecordFn, SendFn, Shard, split_evenly
from kvlab.rundir import Record, RunClock

_NS_PER_S = 1_000_000_000
# Sleep until this close to a deadline, then yield to the loop until it passes: the
# event loop's timer wakes up to about a millisecond late, the yields are precise.
_SPIN_NS = 1_000_000


async def sleep_until(clock: RunClock, deadline_ns: int) -> None:
    """Return at ``deadline_ns`` on ``clock`` (or at once if it has passed)."""
    while True:
        remaining = deadline_ns - clock.now()
        if remaining <= 0:
            return
        if remaining > _SPIN_NS:
            await asyncio.sleep((remaining - _SPIN_NS) / _NS_PER_S)
        else:
            await asyncio.sleep(0)


def _stamp(spec: RequestSpec, label: str | None, t_scheduled: int | None) -> RequestSpec:
    return dataclasses.replace(spec, load=label, t_scheduled=t_scheduled)


async def run_warmup(specs: Sequence[RequestSpec], send: SendFn, label: str | None,
                     on_record: RecordFn | None = None) -> list[Record]:
    """Warm-up requests, one after the other, flagged ``warmup`` (never aggregated)."""
    records = []
    for spec in specs:
        record = await send(dataclasses.replace(_stamp(spec, label, None), warmup=True))
        if on_record is not None:
            on_record(record)
        records.append(record)
    return records


async def run_sequential(specs: Sequence[RequestSpec], send: SendFn, clock: RunClock,
                         on_record: RecordFn | None = None, label: str | None = None
                         ) -> list[Record]:
    """One request after the other; ``t_scheduled`` is when the previous one returned."""
    records = []
    for spec in specs:
        record = await send(_stamp(spec, label, clock.now()))
        if on_record is not None:
            on_record(record)
        records.append(record)
    return records


async def run_closed_loop(specs: Sequence[RequestSpec], users: int, send: SendFn,
                          clock: RunClock, on_record: RecordFn | None = None,
                          duration_s: float | None = None, label: str | None = None,
                          start_ns: int | None = None) -> list[Record]:
    """``users`` concurrent users share ``specs`` in order; each sends its next request
    when its previous one returns. With ``duration_s``, users stop taking new requests
    once that much time has passed since the point started (requests under way finish).
    ``start_ns``: the point's start on ``clock`` (default: now), as a load worker
    running a share of the point is given it.
    """
    if users < 1:
        raise ValueError("a closed loop needs at least one user")
    label = label if label is not None else f"c={users}"
    queue = list(reversed(specs))  # pop() takes them in order
    records: list[Record] = []
    start = clock.now() if start_ns is None else start_ns
    stop_at = None if duration_s is None else start + int(duration_s * _NS_PER_S)

    async def user() -> None:
        while queue:
            now = clock.now()
            if stop_at is not None and now >= stop_at:
                return
            spec = queue.pop()
            record = await send(_stamp(spec, label, now))
            records.append(record)
            if on_record is not None:
                on_record(record)

    await asyncio.gather(*(user() for _ in range(users)))
    return records


async def run_open_loop(specs: Sequence[RequestSpec], offsets_ns: Sequence[int], send: SendFn,
                        clock: RunClock, on_record: RecordFn | None = None,
                        max_concurrency: int | None = None, label: str | None = None,
                        start_ns: int | None = None) -> list[Record]:
    """Send ``specs[i]`` at ``offsets_ns[i]`` after the point's start (``start_ns`` on
    ``clock``, default now), whatever is in flight; with ``max_concurrency``, an arrival
    waits for a free place (and is late)."""
    if len(offsets_ns) > len(specs):
        raise ValueError(f"{len(offsets_ns)} arrivals but only {len(specs)} requests")
    cap = asyncio.Semaphore(max_concurrency) if max_concurrency else None
    records: list[Record] = []
    tasks: set[asyncio.Task[None]] = set()
    start = clock.now() if start_ns is None else start_ns

    async def one(spec: RequestSpec) -> None:
        try:
            record = await send(spec)
            records.append(record)
            if on_record is not None:
                on_record(record)
        finally:
            if cap is not None:
                cap.release()

    try:
        for spec, offset in zip(specs, offsets_ns, strict=False):
            deadline = start + offset
            await sleep_until(clock, deadline)
            if cap is not None:
                await cap.acquire()
            task = asyncio.create_task(one(_stamp(spec, label, deadline)))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks)
    finally:
        for task in tasks:  # an interrupted point leaves nothing running behind it
            task.cancel()
    return records


async def run_point(point: PointShare, specs: Sequence[RequestSpec], send: SendFn,
                    clock: RunClock, on_record: RecordFn | None = None,
                    warmup: Sequence[RequestSpec] = ()) -> list[Record]:
    """Run one load point: optional warm-ups (sequential, flagged), then ``specs`` under
    the point's load. Only measured Records are returned; warm-ups go to ``on_record``."""
    await run_warmup(warmup, send, point.label, on_record)
    with paused_gc():  # a collection mid-point would timestamp every stream late
        return await point.run(specs, send, clock, on_record)


@dataclass(frozen=True)
class ClosedLoopShare:
    """``users`` users sending ``specs`` in order (the point's or a worker's share),
    taking no new request once ``duration_s`` has passed since the start."""

    label: str | None
    users: int
    duration_s: float | None = None

    def max_in_flight(self, n_requests: int) -> int:
        return max(1, self.users)

    async def run(self, specs: Sequence[RequestSpec], send: SendFn, clock: RunClock,
                  on_record: RecordFn | None = None, start_ns: int | None = None
                  ) -> list[Record]:
        return await run_closed_loop(specs, self.users, send, clock, on_record,
                                     duration_s=self.duration_s, label=self.label,
                                     start_ns=start_ns)


@dataclass(frozen=True)
class OpenLoopShare:
    """Requests sent at ``offsets_ns`` after the start (the point's or a worker's
    share), at most ``max_concurrency`` in flight."""

    label: str | None
    offsets_ns: tuple[int, ...]
    max_concurrency: int | None = None

    def max_in_flight(self, n_requests: int) -> int:
        return max(1, min(self.max_concurrency or n_requests, n_requests))

    async def run(self, specs: Sequence[RequestSpec], send: SendFn, clock: RunClock,
                  on_record: RecordFn | None = None, start_ns: int | None = None
                  ) -> list[Record]:
        return await run_open_loop(specs, self.offsets_ns, send, clock, on_record,
                                   max_concurrency=self.max_concurrency, label=self.label,
                                   start_ns=start_ns)


def shard_closed_loop(label: str | None, users: int, duration_s: float | None,
                      specs: Sequence[RequestSpec], workers: int) -> list[Shard]:
    """A closed loop's users split as evenly as possible over the workers (at most one
    worker per user); request ``i`` belongs to user ``i mod users``, so each worker's
    users share the requests of their own, in order."""
    if workers < 1:
        raise ValueError("a load needs at least one worker")
    active = min(users, workers)
    share: list[list[RequestSpec]] = [[] for _ in range(active)]
    for i, spec in enumerate(specs):
        k = (i % users) % active
        share[k].append(dataclasses.replace(spec, worker=k))
    return [Shard(k, tuple(share[k]), ClosedLoopShare(label, u, duration_s))
            for k, u in enumerate(split_evenly(users, active))]


def shard_open_loop(label: str | None, offsets_ns: Sequence[int],
                    max_concurrency: int | None, specs: Sequence[RequestSpec],
                    workers: int) -> list[Shard]:
    """An open loop's arrivals dealt out: arrival ``i`` goes to worker ``i mod N``, sent
    at its planned deadline, so together the workers offer exactly the planned arrivals.
    A ``max_concurrency`` cap is split over the workers (a cap below N: ValueError)."""
    if workers < 1:
        raise ValueError("a load needs at least one worker")
    if len(offsets_ns) > len(specs):
        raise ValueError(f"{len(offsets_ns)} arrivals but only {len(specs)} requests")
    caps: list[int | None] = [None] * workers
    if max_concurrency is not None:
        if max_concurrency < workers:
            raise ValueError(f"max_concurrency {max_concurrency} cannot be split over "
                             f"{workers} workers (each needs a place)")
        caps = list(split_evenly(max_concurrency, workers))
    shards = []
    for k in range(min(workers, len(offsets_ns))):
        mine = range(k, len(offsets_ns), workers)
        shards.append(Shard(
            k, tuple(dataclasses.replace(specs[i], worker=k) for i in mine),
            OpenLoopShare(label, tuple(offsets_ns[i] for i in mine), caps[k])))
    return shards
