"""The coordinator's side of a sharded load point: clocks, start, records back, stop.

For one load point over N workers (:class:`WorkerHandle`: a Ray actor's handle, or a
:class:`~kvlab.bench.workers.worker.LoadWorker` in this process), :func:`launch`

1. shards the point's schedule (its strategy's ``shard``, :mod:`kvlab.bench.plan.loads`),
2. measures each worker's clock offset (:mod:`kvlab.bench.workers.clocks`) and gives it
   its shard and its run clock (the run's start moved by that offset);

then :func:`collect` starts every worker at one instant of the run's time axis and
takes their records back as they land, merged in completion order
(:mod:`kvlab.bench.workers.merge`), each handed to ``on_record`` (the run's one writer).
Whatever stops it (a Ctrl-C cancels it, a worker fails), every worker is stopped and
every record it landed is still handed over before the exception goes on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kvlab.bench.client.endpoints import Endpoint, RequestSpec
from kvlab.bench.plan.loads.base import LoadStrategy, Shard
from kvlab.bench.workers.clocks import ClockOffset, measure_offset
from kvlab.bench.workers.merge import Merger
from kvlab.bench.workers.worker import Batch
from kvlab.errors import WorkerError
from kvlab.rundir import Record, RunClock

DRAIN_S = 0.05  # a worker answers a drain after this long without records (s)
START_LEAD_NS = 50_000_000  # the common start is this far after the last worker took its shard
STOP_TIMEOUT_S = 30.0  # how long a stopped worker has to hand back its last records


class WorkerHandle(Protocol):
    """One worker as the coordinator calls it (every call is awaited)."""

    index: int

    async def now_ns(self) -> int: ...
    async def facts(self) -> dict[str, Any]: ...
    async def load(self, shard: Shard, endpoint: Endpoint, t0_ns: int) -> int: ...
    async def go(self, start_ns: int) -> None: ...
    async def drain(self, wait_s: float) -> Batch: ...
    async def stop(self) -> Batch: ...


@dataclass
class Launch:
    """A load point handed out: the workers it uses, their shards and clock offsets."""

    handles: list[WorkerHandle]
    shards: list[Shard]
    offsets: list[ClockOffset]

    def clocks(self) -> list[dict[str, Any]]:
        """Per worker: its index, requests and clock offset (for the run's state)."""
        return [{"worker": h.index, "requests": len(s.specs), **o.to_json()}
                for h, s, o in zip(self.handles, self.shards, self.offsets, strict=True)]


async def launch(handles: Sequence[WorkerHandle], point: LoadStrategy,
                 specs: Sequence[RequestSpec], endpoint: Endpoint, clock: RunClock) -> Launch:
    """Shard ``point`` over ``handles``, measure each worker's clock and load its shard."""
    shards = point.shard(specs, len(handles))
    used = [handles[s.worker] for s in shards]
    offsets = [await measure_offset(h.now_ns) for h in used]
    await asyncio.gather(*(h.load(s, endpoint, clock.t0_ns + o.offset_ns)
                           for h, s, o in zip(used, shards, offsets, strict=True)))
    return Launch(used, shards, offsets)


async def collect(started: Launch, clock: RunClock,
                  on_record: Callable[[Record], None] | None = None) -> list[Record]:
    """Start every worker of ``started`` at once and take its records until all are
    done; returns them in completion order (each also handed to ``on_record`` as it can
    be written). On any exception (a cancellation included) every worker is stopped and
    its records handed over before the exception is raised again."""
    merger = Merger([h.index for h in started.handles])
    out: list[Record] = []

    def emit(records: list[Record]) -> None:
        for record in records:
            out.append(record)
            if on_record is not None:
                on_record(record)

    pending: dict[asyncio.Future[Batch], WorkerHandle] = {}
    try:
        start_ns = clock.now() + START_LEAD_NS
        await asyncio.gather(*(h.go(start_ns) for h in started.handles))
        pending = {asyncio.ensure_future(h.drain(DRAIN_S)): h for h in started.handles}
        while pending:
            finished, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for future in finished:
                handle = pending.pop(future)
                batch = future.result()
                emit(merger.add(handle.index, batch.records, batch.watermark_ns, batch.done))
                if batch.error is not None:  # its records are in; the others are stopped
                    raise WorkerError(f"load worker {handle.index} failed: {batch.error}")
                if not batch.done:
                    pending[asyncio.ensure_future(handle.drain(DRAIN_S))] = handle
        emit(merger.flush())
        return out
    except BaseException:
        emit(await stop_all(started.handles, pending, merger))
        raise


async def stop_all(handles: list[WorkerHandle], pending: dict[asyncio.Future[Batch],
                                                               WorkerHandle],
                    merger: Merger) -> list[Record]:
    """Stop every worker; the records of drains under way and of the stops, merged."""
    stops = [asyncio.ensure_future(h.stop()) for h in handles]
    waiting = [*pending, *stops]
    await asyncio.wait(waiting, timeout=STOP_TIMEOUT_S)
    out: list[Record] = []
    for future in waiting:
        if not future.done() or future.cancelled() or future.exception() is not None:
            continue  # a dead worker's records are lost with it
        batch = future.result()
        out += merger.add(batch.worker, batch.records, batch.watermark_ns, True)
    return out + merger.flush()
