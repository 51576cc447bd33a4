"""A synthetic inference server: streams tokens on an exact schedule and logs its sends.

It speaks llama.cpp ``POST /completion`` and OpenAI ``POST /v1/chat/completions`` /
``/v1/completions`` (plus ``/health`` and ``/v1/models``) but generates nothing: each
request is answered on the schedule its body asks for, so a benchmark client can be
measured against a clock it does not own. The schedule (all fields optional, defaults
from the server's flags)::

    "synthetic": {"ttft_ms": 20, "itl_ms": 50, "tokens": 64,
                  "tokens_per_event": 1, "events_per_write": 1, "id": "q1"}

- ``ttft_ms``: request fully received -> first content write.
- ``itl_ms``: gap between successive content *writes* (= inter-token latency when
  ``tokens_per_event`` and ``events_per_write`` are 1). 0 means "as fast as the socket
  takes it" (ingest tests).
- ``prompt_tokens``: the prompt tokens reported (``usage.prompt_tokens``,
  ``tokens_evaluated``); by default the prompt is counted by
  :func:`prompt_token_count` (words and punctuation marks), so a client that sizes
  prompts on ``usage`` sees counts that grow with the prompt. There is no
  ``/tokenize``: this is how kvlab measures an endpoint without one.
- ``tokens_per_event``: tokens in one SSE event; ``events_per_write``: SSE events in
  one socket write (both let a client's ingest be measured without this server being
  the limit). Without ``tokens`` the request's ``n_predict``/``max_tokens`` is used.

Send times: ``time.perf_counter_ns()`` read just before each ``transport.write`` of
content. On Linux ``perf_counter`` is ``clock_gettime(CLOCK_MONOTONIC)``, one clock for
every process on the machine, so a client on the same host can subtract them from its
own readings (``GET /synthetic/clock`` lets it check). They are kept per request id in
``GET /synthetic/log?id=...`` (all of them without ``id``; ``&clear=1`` empties the log)
and, when the schedule sets ``"echo_sends": true``, in the final event as
``synthetic_send_ns``. ``GET /synthetic/stats`` gives the server's CPU time and its
lateness against the schedule, which is how one checks it was not the bottleneck.

Deadlines are absolute (``t_received + ttft + k * itl``) so drift does not add up; a
write that finds later deadlines already due sends them in the same write (catch-up).

``--slots N`` (default 0: every request is answered at once, however many are in
flight) makes it a server of N slots: a request waits for a free slot, its schedule
starts when it gets one (``t_start + ttft + k * itl``) and it frees the slot after its
last content write. One slot serves one request per ``ttft + (tokens − 1) * itl`` ms,
so its capacity can be computed by hand (the capacity search's check).
It runs on raw asyncio with a minimal HTTP/1.1 parser (keep-alive, chunked responses)
because a framework's per-event cost would make it the limit at 1024 streams.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import time
from collections import OrderedDict
from dataclasses import dataclass, fields, replace
from typing import Any
from urllib.parse import parse_qs, urlsplit

from kvlab.api.dialect import AnswerHead, Dialect
from kvlab.api.dialects import dialect_at
from kvlab.serve.synthetic_events import MODEL_ID, finish_of, prompt_token_count, token_text
from kvlab.serve.synthetic_http import Conn, http_response

LOG_LIMIT = 20_000  # requests kept in the send log; the oldest are dropped


@dataclass(frozen=True)
class Schedule:
    """When and how a synthetic answer is written (times in ms)."""

    ttft_ms: float = 20.0
    itl_ms: float = 50.0
    tokens: int = 64
    tokens_per_event: int = 1
    events_per_write: int = 1
    prompt_tokens: int = -1  # reported as tokens_evaluated / usage.prompt_tokens;
    # -1: counted from the request (see prompt_token_count)

    @property
    def n_events(self) -> int:
        return math.ceil(self.tokens / self.tokens_per_event)

    def override(self, body: dict[str, Any]) -> Schedule:
        """This schedule with the request's ``synthetic`` fields (and max tokens) applied."""
        given = body.get("synthetic") or {}
        known = {f.name for f in fields(self)}
        changes = {k: type(getattr(self, k))(v) for k, v in given.items() if k in known}
        if "tokens" not in changes:
            for key in ("n_predict", "max_completion_tokens", "max_tokens"):
                if isinstance(body.get(key), int) and body[key] > 0:
                    changes["tokens"] = body[key]
                    break
        out = replace(self, **changes)
        if out.tokens < 1 or out.tokens_per_event < 1 or out.events_per_write < 1:
            raise ValueError("tokens, tokens_per_event and events_per_write must be >= 1")
        if out.ttft_ms < 0 or out.itl_ms < 0:
            raise ValueError("ttft_ms and itl_ms must be >= 0")
        return out


class SyntheticServer:
    """The server state: default schedule, send log and statistics."""

    def __init__(self, default: Schedule | None = None, slots: int = 0) -> None:
        self.default = default or Schedule()
        if slots < 0:
            raise ValueError("slots must be >= 0 (0: no limit)")
        self.slots = slots
        self._free: asyncio.Semaphore | None = None  # made on start (the loop's)
        self.log: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.lateness_ns: list[int] = []  # per write: send time - its deadline
        self.requests = 0
        self.events = 0
        self.writes = 0
        self._seq = 0
        self._server: asyncio.AbstractServer | None = None
        self._loop_offset_s = 0.0  # loop.time() - perf_counter(); 0 on Linux

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        """Listen; return the bound port."""
        loop = asyncio.get_running_loop()
        self._loop_offset_s = loop.time() - time.perf_counter()
        self._free = asyncio.Semaphore(self.slots) if self.slots else None
        self._server = await loop.create_server(
            lambda: Conn(self.handle), host, port, backlog=4096, reuse_address=True
        )
        return self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    # -- routing -------------------------------------------------------------------

    async def handle(self, conn: Conn, method: str, target: str, body: bytes) -> None:
        """Answer one request on ``conn`` (streams are written as they are due)."""
        t_recv = time.perf_counter_ns()
        url = urlsplit(target)
        path, query = url.path, parse_qs(url.query)
        if method == "GET":
            answer = self._get(path, query)
            conn.write(http_response(404, {"error": {"message": f"no route GET {path}",
                                                     "code": 404}}) if answer is None
                       else http_response(200, answer))
            return
        dialect = dialect_at(path)  # every generating API's routes (kvlab.api)
        if method != "POST" or dialect is None or not dialect.generates:
            conn.write(http_response(404, {"error": {"message": f"no route {method} {path}"}}))
            return
        try:
            req = json.loads(body or b"{}")
            sched = self.default.override(dialect.chat_request(req))  # OpenAI's shape
            if sched.prompt_tokens < 0:  # counted in OpenAI's shape (messages, prompt)
                sched = replace(sched, prompt_tokens=prompt_token_count(
                    dialect.chat_request(req), dialect.prompt_field))
        except (ValueError, TypeError) as exc:
            conn.write(http_response(400, {"error": {"message": str(exc), "code": 400}}))
            return
        await self._answer(conn, dialect, req, sched, t_recv)

    def _get(self, path: str, query: dict[str, list[str]]) -> Any:
        """The answer to a GET, or None (404) for an unknown path."""
        if path in ("/health", "/v1/health"):
            return {"status": "ok"}
        if path in ("/v1/models", "/models"):
            return {"object": "list", "data": [{"id": MODEL_ID, "object": "model",
                                                "owned_by": "kvlab", "created": 0}]}
        if path == "/synthetic/clock":
            return {"perf_counter_ns": time.perf_counter_ns()}
        if path == "/synthetic/stats":
            stats = self.stats()
            if query.get("reset"):
                self.lateness_ns.clear()
                self.requests = self.events = self.writes = 0
            return stats
        if path == "/synthetic/log":
            ids = query.get("id")
            out = {i: self.log[i] for i in ids if i in self.log} if ids else dict(self.log)
            if query.get("clear"):
                self.log.clear()
            return out
        return None  # 404

    def stats(self) -> dict[str, Any]:
        """CPU seconds used so far and lateness of writes against their deadlines (ms)."""
        late = sorted(self.lateness_ns)

        def pct(q: float) -> float | None:
            return late[min(len(late) - 1, int(q * len(late)))] / 1e6 if late else None

        return {
            "cpu_s": time.process_time(),
            "requests": self.requests,
            "events": self.events,
            "writes": self.writes,
            "lateness_ms": {"p50": pct(0.5), "p99": pct(0.99),
                            "max": late[-1] / 1e6 if late else None},
        }

    # -- one streamed (or whole) answer ----------------------------------------------

    async def _answer(
        self, conn: Conn, dialect: Dialect, req: dict[str, Any], sched: Schedule, t_recv: int
    ) -> None:
        self.requests += 1
        self._seq += 1
        rid = str((req.get("synthetic") or {}).get("id") or f"s{self._seq}")
        head = AnswerHead(id=dialect.id_prefix + rid, created=int(time.time()),
                          model=MODEL_ID, fingerprint="synthetic",
                          n_prompt=sched.prompt_tokens)
        stream = bool(req.get("stream"))
        sends: list[int] = []
        tokens: list[int] = []
        if stream:
            conn.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache"
                b"\r\nX-Accel-Buffering: no\r\nTransfer-Encoding: chunked\r\n\r\n"
            )
            opening = dialect.opening(head)
            if opening:
                conn.write_chunk(opening)
        if self._free is None:
            await self._emit(conn, dialect, head, sched, t_recv, stream, sends, tokens)
        else:
            async with self._free:  # the schedule starts when a slot is free
                await self._emit(conn, dialect, head, sched, time.perf_counter_ns(), stream,
                                 sends, tokens)
        if conn.closed:
            return
        entry = {"id": rid, "api": dialect.kind, "t_recv_ns": t_recv, "send_ns": sends,
                 "tokens": tokens, "schedule": sched.__dict__}
        self.log[rid] = entry
        while len(self.log) > LOG_LIMIT:
            self.log.popitem(last=False)
        echo = sched.n_events and (req.get("synthetic") or {}).get("echo_sends")
        extra = {"synthetic_send_ns": sends} if echo else None
        finish = finish_of(sched, t_recv, sends, stream)
        if stream:
            include_usage = bool((req.get("stream_options") or {}).get("include_usage"))
            conn.write_chunk(dialect.closing(head, finish, include_usage, extra) + dialect.done)
            conn.write(b"0\r\n\r\n")
        else:
            conn.write(http_response(200, {**dialect.whole(head, finish), **(extra or {})}))

    async def _emit(self, conn: Conn, dialect: Dialect, head: AnswerHead, sched: Schedule,
                    t_recv: int, stream: bool, sends: list[int], tokens: list[int]) -> None:
        """Write the content events on schedule; append each event's send time."""
        loop = asyncio.get_running_loop()
        k, per_write, n_events = sched.tokens_per_event, sched.events_per_write, sched.n_events
        n_writes = math.ceil(n_events / per_write)
        itl_ns = round(sched.itl_ms * 1e6)
        t_first = t_recv + round(sched.ttft_ms * 1e6)
        token_event = dialect.token_event
        event, written, w = 0, 0, 0  # next event, tokens written, next write
        while w < n_writes:
            deadline = t_first + w * itl_ns
            delay_s = (deadline - time.perf_counter_ns()) / 1e9
            if delay_s > 0:
                fut = loop.create_future()
                handle = loop.call_at(
                    deadline / 1e9 + self._loop_offset_s, _wake, fut
                )
                try:
                    await fut
                finally:
                    handle.cancel()
            elif itl_ns == 0 and w:
                await asyncio.sleep(0)  # let other streams in between back-to-back writes
            if conn.paused:
                await conn.drain()
            if conn.closed:
                return
            now = time.perf_counter_ns()
            due = w + 1 if itl_ns == 0 else min(n_writes, (now - t_first) // itl_ns + 1)
            due = max(due, w + 1)
            last = min(n_events, due * per_write)
            parts = []
            for _ in range(event, last):
                n = min(k, sched.tokens - written)
                written += n
                tokens.append(n)
                if stream:  # token ids 1000, 1001, ...
                    parts.append(token_event(head, token_text(n),
                                             range(1000 + written - n, 1000 + written), written))
            t = time.perf_counter_ns()
            if stream:
                conn.write_chunk(b"".join(parts))
            self.lateness_ns.append(t - deadline)
            sends.extend([t] * (last - event))
            self.writes += 1
            self.events += last - event
            event, w = last, due

def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


async def serve(host: str, port: int, default: Schedule, slots: int = 0) -> None:
    """Run until cancelled; print one ``listening on http://host:port`` line first."""
    server = SyntheticServer(default, slots)
    bound = await server.start(host, port)
    print(f"kvlab synthetic server listening on http://{host}:{bound}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await server.close()


def main(argv: list[str] | None = None) -> None:
    """``python -m kvlab.serve.synthetic``: the server as its own process."""
    ap = argparse.ArgumentParser(prog="kvlab-synthetic", description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--slots", type=int, default=0, help="requests served at once (0: any)")
    for f in fields(Schedule):
        ap.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=f.default)
    args = ap.parse_args(argv)
    default = Schedule(**{f.name: getattr(args, f.name) for f in fields(Schedule)})
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.host, args.port, default, args.slots))


if __name__ == "__main__":
    main()
