"""A server's ``/metrics`` gauges, polled while a load point runs.

kvlab's embedded server (and vLLM) expose Prometheus text: requests running and
waiting, KV blocks in use, counters. :class:`GaugeRecorder` asks for it every
``interval_s`` from the same event loop as the load, and appends each answer to the
run's ``gauges.jsonl`` (:class:`kvlab.bench.records.GaugeSample`), so the report can
plot the server's state against time beside the requests' own facts. A server
without ``/metrics`` (llama-server started without ``--metrics``) is simply not
recorded: the first probe decides.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from types import TracebackType
from typing import TextIO

import httpx

from kvlab.bench.records import GaugeSample, RunClock

DEFAULT_INTERVAL_S = 0.25


def parse_prometheus(text: str) -> dict[str, float]:
    """Samples of a Prometheus text body as ``{'name{labels}': value}``; comments and
    unparsable lines are skipped."""
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        try:
            samples[key] = float(value)
        except ValueError:
            continue
    return samples


class GaugeRecorder:
    """``async with GaugeRecorder(url, path, ...)``: poll ``url/metrics`` meanwhile."""

    def __init__(self, base_url: str, path: Path, clock: RunClock, *, mode: str,
                 capacity: int, load: str, interval_s: float = DEFAULT_INTERVAL_S,
                 headers: dict[str, str] | None = None) -> None:
        self.url = base_url.rstrip("/") + "/metrics"
        self.path = path
        self.clock = clock
        self.mode, self.capacity, self.load = mode, capacity, load
        self.interval_s = interval_s
        self.headers = headers or {}
        self.samples = 0  # answers recorded
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> GaugeRecorder:
        self._task = asyncio.create_task(self._poll())
        return self

    async def __aexit__(self, *exc: type[BaseException] | BaseException | TracebackType | None
                        ) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _poll(self) -> None:
        async with httpx.AsyncClient(timeout=2.0, headers=self.headers) as client:
            with self.path.open("a", encoding="utf-8") as out:
                while True:
                    if not await self._sample(client, out) and self.samples == 0:
                        return  # no /metrics here: nothing to record
                    await asyncio.sleep(self.interval_s)

    async def _sample(self, client: httpx.AsyncClient, out: TextIO) -> bool:
        try:
            response = await client.get(self.url)
        except httpx.HTTPError:
            return False
        if response.status_code != 200 or "text/plain" not in response.headers.get(
                "content-type", ""):
            return False
        samples = parse_prometheus(response.text)
        if not samples:
            return False
        row = GaugeSample(mode=self.mode, capacity=self.capacity, load=self.load,
                          t_ns=self.clock.now(), samples=samples)
        out.write(row.model_dump_json() + "\n")
        out.flush()
        self.samples += 1
        return True
