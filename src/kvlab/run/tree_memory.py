"""A launched server's resident memory during a load point, sampled with psutil.

:class:`TreeMemoryRecorder` reads the resident set size of the server's whole process
tree (the process kvlab started and every descendant: vLLM's API server, engine core and
workers) before the point's first request, every ``interval_s`` while it runs (on the
same event loop as the load, beside the ``/metrics`` polling) and after its last
answer, and appends each reading to ``process_memory.jsonl``
(:class:`kvlab.rundir.process_memory.MemorySample`). A reading costs one small ``/proc`` read
per process. A process that ends between listing and reading is left out of that
sample; a tree that is gone is not sampled.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from types import TracebackType
from typing import Literal

import psutil

from kvlab.rundir import JsonlAppender, MemorySample, RunClock

DEFAULT_INTERVAL_S = 0.25


def tree_rss(pid: int) -> tuple[int, int] | None:
    """(Σ resident bytes, processes) of ``pid`` and its descendants; None when ``pid``
    is gone."""
    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    total = count = 0
    for process in tree:
        with contextlib.suppress(psutil.Error):
            total += process.memory_info().rss
            count += 1
    return (total, count) if count else None


class TreeMemoryRecorder:
    """``async with TreeMemoryRecorder(pid, path, clock, ...)``: a ``start`` reading on
    entry, ``during`` readings every ``interval_s``, an ``end`` reading on exit."""

    def __init__(self, pid: int, path: Path, clock: RunClock, *, mode: str, capacity: int,
                 load: str | None, interval_s: float = DEFAULT_INTERVAL_S) -> None:
        self.pid, self.path, self.clock = pid, path, clock
        self.mode, self.capacity, self.load = mode, capacity, load
        self.interval_s = interval_s
        self.samples = 0
        self._out: JsonlAppender | None = None
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> TreeMemoryRecorder:
        self._out = JsonlAppender(self.path)
        self._sample("start")
        self._task = asyncio.create_task(self._poll())
        return self

    async def __aexit__(self, *exc: type[BaseException] | BaseException | TracebackType | None
                        ) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        try:
            if exc[0] is None:
                self._sample("end")
        finally:
            if self._out is not None:
                self._out.close()

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            self._sample("during")

    def _sample(self, phase: Literal["start", "during", "end"]) -> None:
        found = tree_rss(self.pid)
        if found is None or self._out is None:
            return
        row = MemorySample(mode=self.mode, capacity=self.capacity, load=self.load,
                           t_ns=self.clock.now(), rss_bytes=found[0], processes=found[1],
                           phase=phase)
        self._out.append(row)
        self.samples += 1
