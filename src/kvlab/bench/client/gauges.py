"""A server's ``/metrics``, read around and during each load point.

vLLM, llama-server (started with ``--metrics``, as kvlab starts it) and kvlab serve
expose Prometheus text: requests running and waiting, KV-cache use, and counters of
prompt and generated tokens. :class:`GaugeRecorder` reads it for one load point (or the
sequential rows of one mode and capacity) and appends every answer to the run's
``gauges.jsonl`` (:class:`kvlab.bench.records.GaugeSample`):

- a ``start`` sample before the point's first request, and an ``end`` sample after its
  last answer. Each is taken once the server's counters have stopped moving (two
  answers ``SETTLE_INTERVAL_S`` apart with every ``prefix:name_total`` counter equal),
  because a server may count a request a moment after its answer went out. With the
  run positions of the point's requests they delimit exactly which requests the
  counters' deltas cover (:mod:`kvlab.bench.analysis.server_counters`);
- ``during`` samples every ``interval_s`` from the same event loop as the load, for the
  report's plot of the server's state against time.

Any server is read the same way: the names are the server's own, kept verbatim. A
server without ``/metrics`` is simply not recorded: the first answer decides. An
endpoint's API key goes in the request headers only; it is never written or shown.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Literal, TextIO

import httpx

from kvlab.bench.records import GaugeSample, RunClock

DEFAULT_INTERVAL_S = 0.25
SETTLE_INTERVAL_S = 0.1
SETTLE_TIMEOUT_S = 5.0


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


def metrics_url(base_url: str) -> str:
    """``/metrics`` at the server's root (an OpenAI base URL's ``/v1`` left out)."""
    base = base_url.rstrip("/")
    return (base[:-3] if base.endswith("/v1") else base) + "/metrics"


def server_counters(samples: dict[str, float]) -> dict[str, float]:
    """The server's own counters in a sample (``prefix:name_total``; a process
    collector's ``process_cpu_seconds_total`` has no prefix and moves by itself)."""
    return {k: v for k, v in samples.items()
            if ":" in k.split("{")[0] and k.split("{")[0].endswith("_total")}


class GaugeRecorder:
    """``async with GaugeRecorder(url, path, ...)``: a settled ``start`` sample on entry,
    ``during`` samples meanwhile, a settled ``end`` sample on exit.

    ``start_position`` is the run position of the point's first request;
    ``end_position()`` is read on exit: one past the position of its last request.
    ``interval_s`` None: no ``during`` samples, only the two counter readings."""

    def __init__(self, base_url: str, path: Path, clock: RunClock, *, mode: str,
                 capacity: int, load: str | None, start_position: int,
                 end_position: Callable[[], int],
                 interval_s: float | None = DEFAULT_INTERVAL_S,
                 headers: dict[str, str] | None = None) -> None:
        self.url = metrics_url(base_url)
        self.path = path
        self.clock = clock
        self.mode, self.capacity, self.load = mode, capacity, load
        self.start_position = start_position
        self.end_position = end_position
        self.interval_s = interval_s
        self.headers = headers or {}
        self.samples = 0  # answers recorded
        self._client: httpx.AsyncClient | None = None
        self._out: TextIO | None = None
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> GaugeRecorder:
        self._client = httpx.AsyncClient(timeout=2.0, headers=self.headers)
        first = await self._settled()
        if first is None:  # no /metrics here: nothing to record
            await self._client.aclose()
            self._client = None
            return self
        self._out = self.path.open("a", encoding="utf-8")
        self._write(first, "start", self.start_position)
        if self.interval_s is not None:
            self._task = asyncio.create_task(self._poll(self.interval_s))
        return self

    async def __aexit__(self, *exc: type[BaseException] | BaseException | TracebackType | None
                        ) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        try:
            if self._client is not None and exc[0] is None:
                last = await self._settled()
                if last is not None:
                    self._write(last, "end", self.end_position())
        finally:
            if self._out is not None:
                self._out.close()
            if self._client is not None:
                await self._client.aclose()

    async def _poll(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            samples = await self._read()
            if samples is not None:
                self._write(samples, "during", None)

    async def _settled(self) -> dict[str, float] | None:
        """An answer whose counters equal the previous answer's (None: no /metrics);
        after SETTLE_TIMEOUT_S the latest answer, settled or not."""
        previous = await self._read()
        if previous is None:
            return None
        deadline = asyncio.get_running_loop().time() + SETTLE_TIMEOUT_S
        while True:
            await asyncio.sleep(SETTLE_INTERVAL_S)
            current = await self._read()
            if current is None:
                return previous
            if server_counters(current) == server_counters(previous) \
                    or asyncio.get_running_loop().time() > deadline:
                return current
            previous = current

    async def _read(self) -> dict[str, float] | None:
        assert self._client is not None
        try:
            response = await self._client.get(self.url)
        except httpx.HTTPError:
            return None
        if response.status_code != 200 or "text/plain" not in response.headers.get(
                "content-type", ""):
            return None
        return parse_prometheus(response.text) or None

    def _write(self, samples: dict[str, float], phase: Literal["start", "during", "end"],
               position: int | None) -> None:
        assert self._out is not None
        row = GaugeSample(mode=self.mode, capacity=self.capacity, load=self.load,
                          t_ns=self.clock.now(), samples=samples, phase=phase,
                          position=position)
        self._out.write(row.model_dump_json() + "\n")
        self._out.flush()
        self.samples += 1
