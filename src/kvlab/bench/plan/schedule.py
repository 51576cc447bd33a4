"""Load: when each request of a load point leaves, and how many are in flight.

Four kinds of load point:

- ``sequential``: one request after the other (the protocol's default).
- ``concurrency`` (closed loop): N users; each sends its next request as soon as its
  previous one returned, so at most N requests are ever in flight. ``t_scheduled`` is
  the moment the user was free to send.
- ``rate`` (open loop): arrivals at ``rate`` requests/s, ``poisson`` (exponential gaps,
  seeded, so reproducible), ``constant`` (1/rate apart) or ``gamma`` (bursts, see
  :mod:`kvlab.bench.plan.arrivals`), optionally ramped up from 0 over ``ramp_up_s``,
  whatever the server does. ``t_scheduled`` is the arrival time. An optional
  ``max_concurrency`` caps requests in flight: an arrival that finds the cap full waits,
  and leaves late.
- ``trace`` (open loop): the arrival times of a trace (the ``trace`` dataset kind),
  replayed ``value`` times as fast; otherwise as ``rate``.

Precision: arrivals are absolute deadlines on the run's :class:`RunClock` (offsets from
the point's start), never relative sleeps, so one late wake-up does not push every
later request. The wait sleeps to just before the deadline, then yields to the event
loop until it is reached (sub-millisecond without spinning a core for long). A request
that leaves late keeps its lateness in ``t_sent - t_scheduled``; :mod:`kvlab.bench.analysis.load`
measures and flags it — it is never hidden by re-basing the schedule.

Public API::

    point = LoadPoint(kind="rate", value=4.0, requests=20, arrival="poisson")
    records = await run_point(point, specs, send, clock, on_record=store.append)

``specs`` are the requests to make (their ``load`` and ``t_scheduled`` are filled here);
``send(spec) -> Record`` sends one and never raises (``HarnessClient.send`` bound to an
endpoint and clock). Records come back in completion order.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from kvlab.bench.client.endpoints import RequestSpec
from kvlab.bench.client.gcpause import paused_gc
from kvlab.bench.plan.arrivals import Arrival, rate_offsets_ns, trace_offsets_ns
from kvlab.bench.records import Record, RunClock

LoadKind = Literal["sequential", "concurrency", "rate", "trace"]
SendFn = Callable[[RequestSpec], Awaitable[Record]]
RecordFn = Callable[[Record], None]

_NS_PER_S = 1_000_000_000
# Sleep until this close to a deadline, then yield to the loop until it passes: the
# event loop's timer wakes up to about a millisecond late, the yields are precise.
_SPIN_NS = 1_000_000


@dataclass(frozen=True)
class LoadPoint:
    """One load point of a sweep: its kind, its value (N users or requests/s), size."""

    kind: LoadKind = "sequential"
    value: float | None = None  # users (concurrency), requests/s (rate), speed (trace)
    requests: int | None = None  # requests in the point (None: use duration_s)
    duration_s: float | None = None  # rate: arrivals within it; concurrency: stop sending
    arrival: Arrival = "poisson"
    max_concurrency: int | None = None  # rate and trace: cap on requests in flight
    seed: int = 42  # poisson and gamma arrivals
    burstiness: float = 1.0  # gamma arrivals: the gaps' shape (1: Poisson; < 1: bursts)
    ramp_up_s: float | None = None  # rate: rise linearly from 0 to the rate over this
    trace_ms: tuple[float, ...] = ()  # trace: each request's arrival time (ms, in order)
    repetition: int = 0  # > 0: a repeat of the same point (a capacity search's), "#k"

    def __post_init__(self) -> None:
        if self.kind != "sequential" and (self.value is None or self.value <= 0):
            raise ValueError(f"a {self.kind} load point needs a positive value")
        if self.kind == "concurrency" and self.value is not None and self.value != int(self.value):
            raise ValueError(f"concurrency must be a whole number of users, got {self.value}")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        if self.burstiness <= 0:
            raise ValueError("burstiness must be positive")
        if self.ramp_up_s is not None and self.ramp_up_s <= 0:
            raise ValueError("ramp_up_s must be positive")

    @property
    def label(self) -> str | None:
        """The Record's ``load`` label: None (sequential), ``c=8``, ``rate=4.0`` or
        ``trace=2.0`` (a trace replayed twice as fast); a repetition adds ``#k``
        (``rate=4.0#2``)."""
        if self.kind == "sequential":
            return None
        assert self.value is not None
        repeat = f"#{self.repetition}" if self.repetition else ""
        if self.kind == "concurrency":
            return f"c={int(self.value)}{repeat}"
        return f"{self.kind}={float(self.value)!r}{repeat}"  # shortest exact: 4.0, 0.5

    @property
    def target_rate(self) -> float | None:
        """Requests/s the schedule aims at (rate points only)."""
        return self.value if self.kind == "rate" else None

    def max_in_flight(self, n_requests: int) -> int:
        """The most requests this point can have in flight (sizes the HTTP pool)."""
        if self.kind == "sequential":
            return 1
        if self.kind == "concurrency":
            return int(self.value or 1)
        return max(1, min(self.max_concurrency or n_requests, n_requests))

    def with_trace(self, times_ms: Sequence[float]) -> LoadPoint:
        """This trace point with its arrival times (ms): one request per time."""
        return dataclasses.replace(self, trace_ms=tuple(times_ms), requests=len(times_ms))

    def planned_requests(self, available: int) -> int:
        """How many specs this point needs up front (``available`` when by duration
        and not a rate point: closed loops stop by time, not count)."""
        if self.requests is not None:
            return self.requests
        if self.kind == "rate" and self.duration_s is not None:
            return len(arrival_offsets_ns(self, None))
        return available


def arrival_offsets_ns(point: LoadPoint, n: int | None) -> list[int]:
    """Send deadlines of a rate or trace point, ns from its start: ``n`` arrivals, or
    those before ``point.duration_s`` when ``n`` is None. The first arrival is at 0."""
    assert point.kind in ("rate", "trace") and point.value
    if point.kind == "trace":
        return trace_offsets_ns(point.trace_ms, point.value)[:n]
    return rate_offsets_ns(point.value, n, point.duration_s, arrival=point.arrival,
                           burstiness=point.burstiness, seed=point.seed,
                           ramp_up_s=point.ramp_up_s)


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


async def run_point(point: LoadPoint, specs: Sequence[RequestSpec], send: SendFn,
                    clock: RunClock, on_record: RecordFn | None = None,
                    warmup: Sequence[RequestSpec] = ()) -> list[Record]:
    """Run one load point: optional warm-ups (sequential, flagged), then ``specs`` under
    the point's load. Only measured Records are returned; warm-ups go to ``on_record``."""
    label = point.label
    await run_warmup(warmup, send, label, on_record)
    with paused_gc():  # a collection mid-point would timestamp every stream late
        return await _run_measured(point, specs, send, clock, on_record)


async def _run_measured(point: LoadPoint, specs: Sequence[RequestSpec], send: SendFn,
                        clock: RunClock, on_record: RecordFn | None) -> list[Record]:
    label = point.label
    n = point.requests if point.requests is not None else len(specs)
    if point.kind == "sequential":
        return await run_sequential(specs[:n], send, clock, on_record, label)
    if point.kind == "concurrency":
        assert point.value is not None
        return await run_closed_loop(specs[:n], int(point.value), send, clock, on_record,
                                     duration_s=point.duration_s, label=label)
    count = point.requests if point.requests is not None or point.duration_s else len(specs)
    offsets = arrival_offsets_ns(point, count)
    return await run_open_loop(specs, offsets, send, clock, on_record,
                               max_concurrency=point.max_concurrency, label=label)
