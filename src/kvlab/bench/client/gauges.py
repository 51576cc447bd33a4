"""A server's ``/metrics``, read around and during each load point.

vLLM, llama-server (started with ``--metrics``, as kvlab starts it) and kvlab serve
expose Prometheus text: requests running and waiting, KV-cache use, and counters of
prompt and generated tokens. :class:`GaugeRecorder` reads it for one load point (or the
sequential rows of one mode and capacity) and appends every answer to the run's
``gauges.jsonl`` (:class:`kvlab.rundir.gauges.GaugeSample`):

- a ``start`` sample before the point's first request, and an ``end`` sample after its
  last answer. Each is taken once the server's counters have stopped moving (two
  answers ``SETTLE_INTERVAL_S`` apart with every ``prefix:name_total`` counter equal),
  because a server may count a request a moment after its answer went out. With the
  run positions of the point's requests they delimit exactly which requests the
  counters' deltas cover (:mod:`kvlab.analysis.server_counters`);
- ``during`` samples every ``interval_s`` from the same event loop as the load, for the
  report's plot of the server's state against time.

Any server is read the same way, by ``prometheus_client``'s parser: the names are the
server's own, each family keeps its type, histograms and summaries keep every sample,
and a sample's optional timestamp is kept apart from its value. A server without
``/metrics`` is simply not recorded: the first answer decides; an answer that is not
Prometheus text is not recorded either, and :attr:`GaugeRecorder.problem` says why. An
endpoint's API key goes in the request headers only; it is never written or shown.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Literal

import httpx
from prometheus_client.parser import text_string_to_metric_families

from kvlab.rundir import GaugeSample, JsonlAppender, RunClock

DEFAULT_INTERVAL_S = 0.25
SETTLE_INTERVAL_S = 0.1
SETTLE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Exposition:
    """One ``/metrics`` answer, parsed: what a :class:`GaugeSample` keeps."""

    samples: dict[str, float]  # sample key ("name{labels}") -> value
    types: dict[str, str]  # family name -> its TYPE (counter, gauge, histogram, ...)
    timestamps: dict[str, float]  # sample key -> the server's own time (s since epoch)


def sample_key(name: str, labels: dict[str, str]) -> str:
    """``name{a="x",b="y"}`` (labels in the server's order, values escaped as the text
    format escapes them); the bare name without labels."""
    if not labels:
        return name
    return name + "{" + ",".join(f'{k}="{_escaped(v)}"' for k, v in labels.items()) + "}"


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def parse_prometheus(text: str) -> Exposition:
    """A Prometheus text body read by ``prometheus_client``: every sample of every
    family, each family's type and the samples' own timestamps.

    Raises ValueError, naming the problem, for a body that is not Prometheus text."""
    samples: dict[str, float] = {}
    types: dict[str, str] = {}
    timestamps: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for sample in family.samples:
            key = sample_key(sample.name, sample.labels)
            samples[key] = float(sample.value)
            if sample.timestamp is not None:
                timestamps[key] = float(sample.timestamp)
    return Exposition(samples, types, timestamps)


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
    ``interval_s`` None: no ``during`` samples, only the two counter readings. A start
    or end reading that fails (a timeout, an error status; at the start, not a refused
    connection: nothing listens there) is written all the same, without samples and
    with its ``error``, so the point's checks name why they did not run."""

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
        self.problem: str | None = None  # the last answer that was not Prometheus text
        # the last read that failed (timeout, refused, an error status); None: none
        self.failure: str | None = None
        self._refused = False  # that failure was a refused connection
        self._client: httpx.AsyncClient | None = None
        self._out: JsonlAppender | None = None
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> GaugeRecorder:
        self._client = httpx.AsyncClient(timeout=2.0, headers=self.headers)
        first = await self._settled()
        if first is None and (self.failure is None or self._refused):
            # no /metrics here (404, or nothing listens): nothing to record
            await self._client.aclose()
            self._client = None
            return self
        self._out = JsonlAppender(self.path)
        if first is None:  # a failed read is named on the point, never left out
            self._write_failure("start", self.start_position)
            return self
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
                self.failure = None
                last = await self._settled()
                if last is not None:
                    self._write(last, "end", self.end_position())
                elif self.failure is not None:
                    self._write_failure("end", self.end_position())
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

    async def _settled(self) -> Exposition | None:
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
            if server_counters(current.samples) == server_counters(previous.samples) \
                    or asyncio.get_running_loop().time() > deadline:
                return current
            previous = current

    async def _read(self) -> Exposition | None:
        assert self._client is not None
        try:
            response = await self._client.get(self.url)
        except httpx.HTTPError as exc:
            self.failure = f"GET {self.url}: {type(exc).__name__} {exc}".strip()[:300]
            self._refused = isinstance(exc, httpx.ConnectError)
            return None
        if response.status_code >= 500 or response.status_code in (408, 429):
            # a server that has /metrics but did not answer it (404, 401: none for us)
            self.failure = f"GET {self.url} answered HTTP {response.status_code}"
        if response.status_code != 200 or "text/plain" not in response.headers.get(
                "content-type", ""):
            return None
        try:
            found = parse_prometheus(response.text)
        except ValueError as exc:
            self.problem = f"/metrics is not Prometheus text ({exc}); not recorded"[:300]
            return None
        return found if found.samples else None

    def _write_failure(self, phase: Literal["start", "end"], position: int) -> None:
        """A bracket reading that failed: no samples, the failure named."""
        assert self._out is not None
        row = GaugeSample(mode=self.mode, capacity=self.capacity, load=self.load,
                          t_ns=self.clock.now(), samples={}, phase=phase, position=position,
                          error=self.failure)
        self._out.append(row)

    def _write(self, found: Exposition, phase: Literal["start", "during", "end"],
               position: int | None) -> None:
        assert self._out is not None
        row = GaugeSample(mode=self.mode, capacity=self.capacity, load=self.load,
                          t_ns=self.clock.now(), samples=found.samples, types=found.types,
                          timestamps=found.timestamps, phase=phase, position=position)
        self._out.append(row)
        self.samples += 1
