"""One answer, through either HTTP client, read into :class:`ResponseFacts`.

:func:`read_answer` takes kvlab's own client's :class:`~kvlab.bench.client.rawhttp.Response`
or an :class:`AiohttpAnswer` (the same interface over aiohttp), checks the status and
content type, and feeds a streamed body read by read to :class:`_StreamReader`, whose
events share their read's arrival time. :mod:`kvlab.bench.client.endpoints` owns the request,
the connection and the outcome of an exception.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import aiohttp

from kvlab.bench.client.rawhttp import Response as RawResponse
from kvlab.bench.client.responses import (
    ERROR_EXCERPT_CHARS,
    MalformedResponse,
    ResponseFacts,
    malformed,
)
from kvlab.bench.client.sse import SSEParser
from kvlab.bench.records import ApiKind, Outcome, RunClock


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


async def read_answer(resp: RawResponse | AiohttpAnswer, api: ApiKind, stream: bool,
                  clock: RunClock, facts: ResponseFacts) -> None:
    """Read one answer, through either HTTP client, into ``facts``."""
    facts.t_headers = resp.t_head_ns - clock.t0_ns
    facts.status = resp.status
    if resp.status >= 300:
        raw = (await resp.read())[: 4 * ERROR_EXCERPT_CHARS]
        facts.fail(Outcome.HTTP_ERROR, raw.decode("utf-8", "replace").strip())
        return
    if not stream:
        _whole_answer(await resp.read(), api, facts)
        return
    _check_event_stream(resp.headers.get("content-type", ""))
    reader = _StreamReader(api, clock, facts)
    await resp.stream(reader.feed)
    reader.finish()


def _whole_answer(raw: bytes, api: ApiKind, facts: ResponseFacts) -> None:
    """Facts of a non-streamed answer."""
    try:
        obj = json.loads(raw)
    except ValueError as exc:  # not JSON, or not UTF-8
        raise malformed(exc) from exc
    if not isinstance(obj, dict):
        raise MalformedResponse(f"expected a JSON object, got {type(obj).__name__}")
    if api is ApiKind.LLAMACPP_COMPLETION:
        facts.llama_answer(obj)
    else:
        facts.openai_answer(obj, api is ApiKind.OPENAI_CHAT)


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

    __slots__ = ("_chat", "_done", "_facts", "_llama", "_parser", "_t0")

    def __init__(self, api: ApiKind, clock: RunClock, facts: ResponseFacts) -> None:
        self._llama = api is ApiKind.LLAMACPP_COMPLETION
        self._chat = api is ApiKind.OPENAI_CHAT
        self._facts = facts
        self._parser = SSEParser()
        self._t0 = clock.t0_ns
        self._done = False
        facts.saw_terminator = False
        if not self._llama:
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
            self._done = (
                facts.llama_events(events, t) if self._llama
                else facts.openai_events(events, t, self._chat)
            )

    def finish(self) -> None:
        """End of body: a last unterminated event counts; no terminator = disconnected."""
        facts = self._facts
        if not self._done:
            tail = self._parser.close()
            if tail:
                t = time.perf_counter_ns() - self._t0
                self._done = (
                    facts.llama_events(tail, t) if self._llama
                    else facts.openai_events(tail, t, self._chat)
                )
        if not self._done:
            what = "the final stop event" if self._llama else "data: [DONE]"
            facts.fail(Outcome.DISCONNECTED, f"stream ended before {what}")
