"""The in-memory engine, for tests: every request answered on a schedule, no socket.

As httpx's ``MockTransport`` answers a client in memory, :class:`MemoryEngine` answers
each request itself: the first token ``ttft_ms`` after it was sent, then one token every
``itl_ms`` until the asked ``max_tokens``, each at an absolute deadline on the run's
clock; at most ``slots`` requests are served at once (the others wait for a slot, as at
a server with that many). Its Records are what kvlab's client would have recorded of
such an answer (path, body, chunk times, usage, terminator), so a run through it is
judged and reported like any other. A prompt counts one token per word.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field

from kvlab.bench.client.endpoints import Endpoint, RequestSpec, build_body, record_of
from kvlab.bench.client.responses import ResponseFacts
from kvlab.bench.engines.engine import ClocksFn, EngineSettings
from kvlab.bench.plan.loads.base import LoadStrategy, RecordFn
from kvlab.bench.plan.schedule import run_point, sleep_until
from kvlab.records import Record, RunClock

_NS_PER_MS = 1_000_000


class MemorySettings(EngineSettings):
    """``memory``: answers after ``ttft_ms``, then a token every ``itl_ms``, at most
    ``slots`` at once (None: every request at once)."""

    kind: Literal["memory"] = "memory"
    ttft_ms: float = Field(default=2.0, ge=0)
    itl_ms: float = Field(default=1.0, ge=0)
    slots: int | None = Field(default=None, ge=1)

    def build(self) -> MemoryEngine:
        return MemoryEngine(self)

    def describe(self) -> str:
        return (f"memory: answers after {self.ttft_ms:g} ms, a token every {self.itl_ms:g} "
                "ms" + (f", {self.slots} at once" if self.slots else ""))


class MemoryEngine:
    """Answers every request in memory on the schedule of its settings."""

    def __init__(self, settings: MemorySettings) -> None:
        self.settings = settings
        self.sent: list[RequestSpec] = []  # every request, in the order it was sent
        self._slots: asyncio.Semaphore | None = None

    def start(self) -> None:
        pass

    def close(self) -> None:
        pass

    @property
    def workers(self) -> int | None:
        return None

    def facts(self) -> dict[str, Any] | None:
        return None

    async def send(self, endpoint: Endpoint, spec: RequestSpec, clock: RunClock) -> Record:
        """The Record of ``spec`` answered on schedule (never a failure)."""
        self.sent.append(spec)
        if self._slots is None and self.settings.slots is not None:
            self._slots = asyncio.Semaphore(self.settings.slots)
        t_sent = clock.now()
        facts = ResponseFacts()
        if self._slots is not None:
            await self._slots.acquire()
        try:
            await self._answer(spec, clock, facts)
        finally:
            if self._slots is not None:
                self._slots.release()
        return record_of(endpoint, spec, endpoint.dialect.path, build_body(endpoint, spec),
                         facts, t_sent, clock.now())

    async def _answer(self, spec: RequestSpec, clock: RunClock, facts: ResponseFacts) -> None:
        start = clock.now()
        facts.status, facts.t_headers = 200, start
        first = start + round(self.settings.ttft_ms * _NS_PER_MS)
        for i in range(spec.max_tokens):
            await sleep_until(clock, first + round(i * self.settings.itl_ms * _NS_PER_MS))
            facts.chunk_ns.append(clock.now())
            facts.chunk_tokens.append(1)
            facts.texts.append(f" t{i}")
        if facts.chunk_ns:
            facts.t_first_chunk = facts.t_first_content = facts.t_first_answer = \
                facts.chunk_ns[0]
            facts.t_last_content = facts.chunk_ns[-1]
        facts.prompt_tokens = len(spec.prompt.split())
        facts.output, facts.cached, facts.stop_type = spec.max_tokens, 0, "length"
        facts.saw_terminator = facts.saw_usage = True if spec.stream else None

    async def run_point(self, point: LoadStrategy, specs: Sequence[RequestSpec],
                        endpoint: Endpoint, clock: RunClock, landed: RecordFn,
                        clocks: ClocksFn) -> list[Record]:
        async def send(spec: RequestSpec) -> Record:
            return await self.send(endpoint, spec, clock)

        return await run_point(point, specs, send, clock, landed)

    async def aclose(self) -> None:
        pass
