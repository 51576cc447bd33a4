"""One answer, through either HTTP client, read into :class:`ResponseFacts`.

:func:`read_answer` takes kvlab's own client's :class:`~kvlab.bench.client.rawhttp.Response`
or an :class:`AiohttpAnswer` (the same interface over aiohttp), checks the status and
content type, and feeds a streamed body read by read to :class:`_StreamReader`, whose
events share their read's arrival time; the API's dialect (:mod:`kvlab.api`) reads
the events. :mod:`kvlab.bench.client.endpoints` owns the request, the connection and
the outcome of an exception.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import aiohttp

from kvlab.api.dialect import Dialect
from kvlab.bench.client.rawhttp import Response as RawResponse
from kvlab.bench.client.responses import (
    ERROR_EXCERPT_CHARS,
    MalformedResponse,
    ResponseFacts,
    malformed,
)
from kvlab.bench.client.sse import SSEParser
from kvlab.rundir import Outcome, RunClock


class AiohttpAnswer:
    """An aiohttp response behind :class:`~kvlab.bench.client.rawhttp.Response`'s interface
    (status, headers, t_head_ns, read, stream); each read stamped when its coroutine
    resumes."""

    def __init__(self, resp: aiohttp.ClientResponse, t_head_ns: int) -> None:
        self._resp = resp
        self.status = resp.status
        self.headers = resp.headers  # case-insensitive
        self.t_head_ns = t_head_ns

    async def read(self) -> bytes:
        return await self._resp.read()

    async def stream(self, sink: Callable[[bytes, int], None]) -> None:
        content = self._resp.content
        now = time.perf_counter_ns
        while True:
            chunk = await content.readany()
            if not chunk:
                return
            sink(chunk, now())


async def read_answer(resp: RawResponse | AiohttpAnswer, dialect: Dialect, stream: bool,
                      clock: RunClock, facts: ResponseFacts) -> None:
    """Read one answer of ``dialect``'s API, through either HTTP client, into ``facts``."""
    facts.t_headers = resp.t_head_ns - clock.t0_ns
    facts.status = resp.status
    if resp.status >= 300:
        raw = (await resp.read())[: 4 * ERROR_EXCERPT_CHARS]
        facts.fail(Outcome.HTTP_ERROR, raw.decode("utf-8", "replace").strip())
        return
    if not stream:
        raw = await resp.read()
        facts.t_body = time.perf_counter_ns() - clock.t0_ns
        _whole_answer(raw, dialect, facts)
        return
    _check_event_stream(resp.headers.get("content-type", ""))
    reader = _StreamReader(dialect, clock, facts)
    await resp.stream(reader.feed)
    reader.finish()


def _whole_answer(raw: bytes, dialect: Dialect, facts: ResponseFacts) -> None:
    """Facts of a non-streamed answer."""
    try:
        obj = json.loads(raw)
    except ValueError as exc:  # not JSON, or not UTF-8
        raise malformed(exc) from exc
    if not isinstance(obj, dict):
        raise MalformedResponse(f"expected a JSON object, got {type(obj).__name__}")
    dialect.read_answer(facts, obj)


def _check_event_stream(content_type: str) -> None:
    if not content_type.startswith("text/event-stream"):
        raise MalformedResponse(
            f"streamed answer is {content_type or 'untyped'}, not text/event-stream"
        )


class _StreamReader:
    """A streamed answer's hot path, shared by both HTTP clients: reads in, facts out.

    ``feed(chunk, t_ns)`` takes one network read and its arrival (``perf_counter_ns``);
    every event parsed out of it shares that time.
    """

    __slots__ = ("_dialect", "_done", "_facts", "_parser", "_read", "_t0")

    def __init__(self, dialect: Dialect, clock: RunClock, facts: ResponseFacts) -> None:
        self._dialect = dialect
        self._read = dialect.read_events  # bound once: called once per network read
        self._facts = facts
        self._parser = SSEParser()
        self._t0 = clock.t0_ns
        self._done = False
        facts.saw_terminator = False
        if dialect.states_usage:
            facts.saw_usage = False

    def feed(self, chunk: bytes, t_ns: int) -> None:
        facts = self._facts
        t = t_ns - self._t0
        if facts.t_first_chunk is None:
            facts.t_first_chunk = t
        if self._done:
            return  # what follows the terminator is drained, so the connection is reused
        events = self._parser.feed(chunk)
        if events:
            self._done = self._read(facts, events, t)

    def finish(self) -> None:
        """End of body: a last unterminated event counts; no terminator = disconnected."""
        facts = self._facts
        if not self._done:
            tail = self._parser.close()
            if tail:
                self._done = self._read(facts, tail, time.perf_counter_ns() - self._t0)
        if not self._done:
            facts.fail(Outcome.DISCONNECTED,
                       f"stream ended before {self._dialect.terminator}")
