"""The in-memory driver, for tests: every request answered on a schedule, no socket.

As httpx's ``MockTransport`` answers a client in memory, :class:`MemoryDriver` answers
each request itself: the first token ``ttft_ms`` after it was sent, then one token every
``itl_ms`` until the asked ``max_tokens``, each at an absolute deadline on the run's
clock; at most ``slots`` requests are served at once (the others wait for a slot, as at
a server with that many). Its Records are what kvlab's client would have recorded of
such an answer (path, body, chunk times, usage, terminator), so a run through it is
judged and reported like any other. A prompt counts one token per word (a
conversation: the words of its messages' contents), and an answer is ``max_tokens``
words, so a session's prompt grows by exactly the previous answer and the new input.

With ``prefix_cache``, it keeps every request's words and its answer's (but the last
word, whose K/V a server never computes) and states as cached the longest prefix any
of them shares with a new prompt, rounded down to ``prefix_block`` words and short of
the whole prompt, as a prefix cache that never evicts would. ``refuse``: the query ids
it answers one token short (a turn validation refuses).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field

from kvlab.bench.client.endpoints import Endpoint, RequestSpec, build_body, record_of
from kvlab.bench.client.responses import ResponseFacts
from kvlab.bench.drivers.driver import ClocksFn, DriverSettings
from kvlab.bench.plan.loads.base import LoadStrategy, RecordFn
from kvlab.bench.plan.schedule import run_point, sleep_until
from kvlab.records import Record, RunClock

_NS_PER_MS = 1_000_000


class MemorySettings(DriverSettings):
    """``memory``: answers after ``ttft_ms``, then a token every ``itl_ms``, at most
    ``slots`` at once (None: every request at once)."""

    kind: Literal["memory"] = "memory"
    ttft_ms: float = Field(default=2.0, ge=0)
    itl_ms: float = Field(default=1.0, ge=0)
    slots: int | None = Field(default=None, ge=1)
    prefix_cache: bool = False
    prefix_block: int = Field(default=16, ge=1)
    refuse: tuple[str, ...] = ()

    def build(self) -> MemoryDriver:
        return MemoryDriver(self)

    def describe(self) -> str:
        return (f"memory: answers after {self.ttft_ms:g} ms, a token every {self.itl_ms:g} "
                "ms" + (f", {self.slots} at once" if self.slots else ""))


class MemoryDriver:
    """Answers every request in memory on the schedule of its settings."""

    def __init__(self, settings: MemorySettings) -> None:
        self.settings = settings
        self.sent: list[RequestSpec] = []  # every request, in the order it was sent
        self._slots: asyncio.Semaphore | None = None
        self._seen: list[list[str]] = []  # what its prefix cache holds, in words

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
        words = [w for m in spec.messages for w in m["content"].split()] \
            if spec.messages is not None else spec.prompt.split()
        n = spec.max_tokens - (spec.query_id in self.settings.refuse)
        asked = spec.params.get("cache_prompt") is True
        facts.cached = self._cached(words) if asked else 0
        for i in range(n):
            await sleep_until(clock, first + round(i * self.settings.itl_ms * _NS_PER_MS))
            facts.chunk_ns.append(clock.now())
            facts.chunk_tokens.append(1)
            facts.texts.append(f" t{i}")
        if facts.chunk_ns:
            facts.t_first_chunk = facts.t_first_content = facts.t_first_answer = \
                facts.chunk_ns[0]
            facts.t_last_content = facts.chunk_ns[-1]
        facts.prompt_tokens = len(words)
        facts.output, facts.stop_type = n, "length"
        facts.saw_terminator = facts.saw_usage = True if spec.stream else None
        if self.settings.prefix_cache and asked:
            self._seen.append(words + [f"t{i}" for i in range(n - 1)])

    def _cached(self, words: list[str]) -> int:
        """The prompt words its prefix cache holds (0 without one, or unasked)."""
        if not self.settings.prefix_cache:
            return 0
        best = 0
        for seen in self._seen:
            shared = 0
            for a, b in zip(seen, words, strict=False):
                if a != b:
                    break
                shared += 1
            best = max(best, shared)
        block = self.settings.prefix_block
        return min(best, len(words) - 1) // block * block

    async def run_point(self, point: LoadStrategy, specs: Sequence[RequestSpec],
                        endpoint: Endpoint, clock: RunClock, landed: RecordFn,
                        clocks: ClocksFn) -> list[Record]:
        async def send(spec: RequestSpec) -> Record:
            return await self.send(endpoint, spec, clock)

        return await run_point(point, specs, send, clock, landed)

    async def aclose(self) -> None:
        pass
