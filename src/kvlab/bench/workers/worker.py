"""What one load worker process does: run its shard of a point, keep records until drained.

A :class:`LoadWorker` is the body of a worker (a Ray actor, :mod:`kvlab.bench.workers.ray`,
holds one); it knows nothing of Ray. The coordinator drives it in four calls:

1. ``load(shard, endpoint, t0_ns)``: the shard to send and this worker's run clock
   (``t0_ns`` on this process's ``perf_counter_ns``: the run's start moved by the
   worker's measured clock offset, so its readings fall on the run's time axis); the
   worker opens its connection pool and pauses its garbage collector, and waits;
2. ``go(start_ns)``: start at ``start_ns`` on the run's time axis (all workers at once);
3. ``drain(wait_s)``, repeatedly: the records landed since the last drain (waiting up
   to ``wait_s`` for one), with a watermark: no record this worker returns later ends
   before it, so the coordinator can merge every worker's records in completion order;
4. ``stop()``: cancel whatever is in flight (a Ctrl-C) and return the last records.

Requests go through kvlab's own kernel-stamped HTTP client (``HarnessClient``) on this
process's event loop, with the cyclic garbage collector paused, exactly as in one process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import kvlab
from kvlab.bench.client.endpoints import Endpoint, HarnessClient, RequestSpec
from kvlab.bench.client.gcpause import paused_gc
from kvlab.bench.plan.loads.base import Shard
from kvlab.bench.plan.schedule import sleep_until
from kvlab.records import Record, RunClock


@dataclass
class Batch:
    """Records one worker landed since its last drain.

    ``watermark_ns`` (run clock): every record the worker returns later has
    ``t_end >= watermark_ns``. ``done``: the shard finished (or was stopped); ``error``:
    why it ended with an exception (a fault of kvlab's own code), else None.
    """

    worker: int
    records: list[Record] = field(default_factory=list)
    watermark_ns: int = 0
    done: bool = False
    error: str | None = None


def process_facts() -> dict[str, Any]:
    """Where a worker runs: host name, process id, Python and kvlab versions."""
    return {"host": platform.node(), "pid": os.getpid(),
            "python": platform.python_version(), "kvlab": kvlab.__version__,
            "cores": os.cpu_count()}


class LoadWorker:
    """One worker's state between the coordinator's calls (see the module docstring)."""

    def __init__(self, index: int, http_client: str = "auto") -> None:
        self.index = index
        self.http_client = http_client
        self._records: list[Record] = []
        self._in_flight: dict[int, int] = {}  # send number -> run clock ns when it began
        self._sends = 0
        self._task: asyncio.Task[None] | None = None
        self._landed: asyncio.Event | None = None  # made on the loop that uses it
        self._start: asyncio.Future[int] | None = None  # the start, once go() gives it
        self._clock = RunClock()

    # Every call is a coroutine: Ray runs them all (the worker is an actor) on the worker's
    # one event loop, where the shard's requests run.

    async def now_ns(self) -> int:
        """This process's ``perf_counter_ns`` (the worker's side of a ping-pong)."""
        return time.perf_counter_ns()

    async def facts(self) -> dict[str, Any]:
        """Where this worker runs (for the manifest)."""
        return {"worker": self.index, **process_facts()}

    async def load(self, shard: Shard, endpoint: Endpoint, t0_ns: int) -> int:
        """Take the shard and get ready to send it (connection pool open, garbage
        collector paused: the set-up is not in the first requests' times); returns its
        request count. ``t0_ns``: the run's start on this process's clock."""
        if self._task is not None and not self._task.done():
            raise RuntimeError(f"worker {self.index} is still running a shard")
        self._clock = RunClock(t0_ns)
        self._records, self._in_flight = [], {}
        loop = asyncio.get_running_loop()
        self._landed = asyncio.Event()
        self._start = loop.create_future()
        self._task = loop.create_task(self._run(shard, endpoint, self._clock, self._start))
        self._task.add_done_callback(lambda _: self._wake())
        return len(shard.specs)

    async def go(self, start_ns: int) -> None:
        """Start the loaded shard at ``start_ns`` on the run's time axis."""
        if self._start is None or self._start.done():
            raise RuntimeError(f"worker {self.index} has no shard loaded")
        self._start.set_result(start_ns)

    async def drain(self, wait_s: float) -> Batch:
        """The records landed since the last drain, waiting up to ``wait_s`` for one."""
        if not self._records and self._task is not None and not self._task.done():
            assert self._landed is not None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._landed.wait(), wait_s)
        return self._batch()

    async def stop(self) -> Batch:
        """Cancel the shard's requests in flight (they leave no record) and return the
        records landed before."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        return self._batch()

    async def call(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """Run ``fn(*args)`` on this worker's loop (``kvlab calibrate --workers``)."""
        return await fn(*args)

    def _wake(self) -> None:
        if self._landed is not None:
            self._landed.set()

    def _batch(self) -> Batch:
        records, self._records = self._records, []
        if self._landed is not None:
            self._landed.clear()
        task = self._task
        done = task is None or task.done()
        error = None
        if task is not None and task.done() and not task.cancelled() \
                and task.exception() is not None:
            exc = task.exception()
            error = f"{type(exc).__name__}: {exc}"
        watermark = min(self._in_flight.values(), default=self._clock.now())
        return Batch(self.index, records, watermark, done, error)

    async def _run(self, shard: Shard, endpoint: Endpoint, clock: RunClock,
                   start: asyncio.Future[int]) -> None:
        def landed(record: Record) -> None:
            self._records.append(record)
            self._wake()

        async with HarnessClient(max_connections=shard.max_in_flight(),
                                 http_client=self.http_client) as pool:
            # its share's connections opened before the point's common start
            await pool.warm(endpoint, shard.max_in_flight())

            async def send(spec: RequestSpec) -> Record:
                number = self._sends = self._sends + 1
                self._in_flight[number] = clock.now()  # its record ends after this
                try:
                    return await pool.send(endpoint, spec, clock)
                finally:
                    del self._in_flight[number]

            with paused_gc():  # as in one process: no collection mid-point
                start_ns = await start
                await sleep_until(clock, start_ns)
                await shard.share.run(shard.specs, send, clock, landed, start_ns)
