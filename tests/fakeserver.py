"""A small fake inference server on 127.0.0.1 that speaks llama.cpp and OpenAI shapes.

It answers ``POST /completion``, ``/v1/chat/completions``, ``/v1/completions`` (streamed
and not), ``/v1/responses`` and ``/v1/messages`` (tests/fakeapis.py, with their own
faults: a stream cut mid-block, a malformed event, an answer in the wrong API's shape),
``GET /v1/models`` and ``GET /health``, and injects faults on demand. Use it
as a context manager; it runs its own event loop in a daemon thread, so sync and async
tests can share it:

    with FakeServer(api_key="k", model="m") as srv:
        srv.fault = "cut"                          # every request until reset ...
        ... Endpoint(base_url=srv.base_url, ...)
        # ... or per request: params={"fake_fault": "cut"} (the body wins)

Faults (``FAULTS``): ``cut`` (socket closed mid-stream), ``no_usage``, ``no_done``
(OpenAI stream without ``[DONE]``; llama.cpp stream without the final event),
``malformed`` (an event that is not JSON), ``error_event`` (``data: {"error":...}``),
``ctx_exceeded`` (HTTP 400 exceed_context_size_error), ``slow`` (headers after
``slow_s``), ``wrong_tokens`` (reports one token fewer than sent), ``truncated``,
``not_sse`` (JSON body to a streamed request), ``no_timings`` (a llama.cpp answer
without ``timings``; its ``tokens_cached``, prompt + generated tokens, stays, as
llama.cpp sends it). ``prefix_cache`` (OpenAI routes): the
server reuses prefixes whatever ``cache_prompt`` says, as vLLM's automatic prefix
caching does: a prompt's words shared with the previous prompt, in whole blocks of
``BLOCK`` words, are reported as ``cached_tokens``; ``details`` False leaves
``prompt_tokens_details`` out (vLLM without ``--enable-prompt-tokens-details``).
``reasoning`` N (OpenAI routes): the first N generated tokens are a reasoning model's
thinking, streamed as ``delta.<reasoning_field>`` (chat; ``reasoning`` as vLLM 0.32
writes it, or ``reasoning_content`` as llama-server does) or beside ``text``
(completions), and returned so in a whole answer; ``usage_reasoning`` is the usage's
``completion_tokens_details.reasoning_tokens`` (None: left out). ``metrics`` is the
body of ``GET /metrics`` (None: 404); ``metrics_status`` another status to answer it
with (a /metrics read that fails).
``GET /v1/models`` and the completion
routes answer 401 without the right ``Authorization: Bearer`` key when ``api_key`` is
set. Bodies and headers received are kept in ``requests``.

The client ingest micro-benchmark (events/s) is ``tests/bench/calibrate/ingest_bench.py``.
"""

from __future__ import annotations

import asyncio
import json
import threading
from functools import partial
from typing import Any

from aiohttp import web

from tests import fakeapis

FAULTS = (
    "cut",
    "no_usage",
    "no_done",
    "malformed",
    "error_event",
    "ctx_exceeded",
    "slow",
    "wrong_tokens",
    "truncated",
    "not_sse",
    "no_timings",
    "wrong_api",  # Responses and Messages routes: the answer in OpenAI chat's shape
)


def _sse(obj: Any) -> bytes:
    data = obj if isinstance(obj, str) else json.dumps(obj)
    return f"data: {data}\n\n".encode()


class FakeServer:
    """Configurable fake llama.cpp/OpenAI server running in a background thread."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        model: str = "fake-model",
        token_delay_s: float = 0.0,
        slow_s: float = 5.0,
        ping: bool = True,
        crlf: bool = False,
    ) -> None:
        self.api_key = api_key
        self.model = model
        self.token_delay_s = token_delay_s  # pause between streamed tokens
        self.slow_s = slow_s  # delay before headers for fault "slow"
        self.ping = ping  # send a ":" comment before the first event
        self.crlf = crlf  # CRLF line endings in the stream
        self.fault: str | None = None
        self.prefix_cache = False  # reuse shared prefixes, ignoring cache_prompt
        self.details = True  # report usage.prompt_tokens_details
        self.reasoning = 0  # generated tokens streamed as reasoning before the answer
        self.reasoning_field = "reasoning"  # or "reasoning_content"
        self.usage_reasoning: int | None = None  # usage's reasoning_tokens; None: absent
        self.metrics: str | None = None  # GET /metrics's text; None: 404
        self.metrics_status = 200  # e.g. 503: a /metrics read that fails
        self._previous: list[str] = []  # the last prompt's words (prefix_cache)
        self.requests: list[dict[str, Any]] = []
        self.base_url = ""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None

    # -- lifecycle -------------------------------------------------------------------

    def __enter__(self) -> FakeServer:
        self._thread.start()
        port = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        self.base_url = f"http://127.0.0.1:{port}"
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _start(self) -> int:
        app = web.Application()
        app.router.add_get("/health", self._health)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_post("/completion", self._quiet(self._completion))
        app.router.add_post("/v1/chat/completions", self._quiet(self._openai))
        app.router.add_post("/v1/completions", self._quiet(self._openai))
        app.router.add_post("/v1/messages", self._quiet(partial(fakeapis.messages, self)))
        app.router.add_post("/v1/responses", self._quiet(partial(fakeapis.responses, self)))
        app.router.add_post("/v1/messages/count_tokens", partial(fakeapis.count_tokens, self))
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        return site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @staticmethod
    def _quiet(handler: Any) -> Any:
        """A client that hangs up mid-stream (as HarnessClient does on a bad event) is normal."""

        async def wrapped(request: web.Request) -> web.StreamResponse:
            try:
                return await handler(request)
            except ConnectionResetError:
                return web.StreamResponse()

        return wrapped

    # -- handlers --------------------------------------------------------------------

    BLOCK = 16  # words per prefix-cache block

    def _cached(self, prompt: str) -> int:
        """Words of ``prompt`` answered from the prefix cache (0 unless prefix_cache)."""
        words, previous = prompt.split(), self._previous
        self._previous = words
        if not self.prefix_cache:
            return 0
        shared = next((i for i, (a, b) in enumerate(zip(words, previous, strict=False))
                       if a != b), min(len(words), len(previous)))
        return shared // self.BLOCK * self.BLOCK

    def _denied(self, request: web.Request) -> web.Response | None:
        given = request.headers.get("x-api-key") if request.path.startswith("/v1/messages") \
            else (request.headers.get("Authorization") or "").removeprefix("Bearer ")
        if self.api_key and given != self.api_key:
            err = {"message": "Invalid API Key", "type": "authentication_error", "code": 401}
            return web.json_response({"error": err}, status=401)
        return None

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _metrics(self, request: web.Request) -> web.Response:
        if self.metrics is None:
            return web.Response(status=404)
        if self.metrics_status != 200:
            return web.Response(status=self.metrics_status, text="overloaded")
        return web.Response(text=self.metrics, content_type="text/plain")

    async def _models(self, request: web.Request) -> web.Response:
        denied = self._denied(request)
        if denied:
            return denied
        return web.json_response({"object": "list", "data": [{"id": self.model}]})

    async def _begin(self, request: web.Request) -> tuple[dict[str, Any], str | None, Any]:
        body = await request.json()
        self.requests.append({"path": request.path, "body": body, "headers": dict(request.headers)})
        fault = body.get("fake_fault", self.fault)
        if fault == "slow":
            await asyncio.sleep(self.slow_s)
        if fault == "ctx_exceeded":
            n = len(str(body.get("prompt", body.get("messages", ""))).split())
            err = {
                "code": 400,
                "message": f"request ({n} tokens) exceeds the available context size "
                "(4 tokens), try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": n,
                "n_ctx": 4,
            }
            return body, fault, web.json_response({"error": err}, status=400)
        return body, fault, self._denied(request)

    async def _stream_start(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        if self.ping:
            await resp.write(b":\n\n")
        return resp

    async def _emit(self, resp: web.StreamResponse, data: bytes) -> None:
        if self.crlf:
            data = data.replace(b"\n", b"\r\n")
        await resp.write(data)
        if self.token_delay_s:
            await asyncio.sleep(self.token_delay_s)

    @staticmethod
    def _cut(request: web.Request) -> None:
        assert request.transport is not None
        request.transport.close()  # no chunked terminator: the client sees a cut

    async def _completion(self, request: web.Request) -> web.StreamResponse:
        body, fault, early = await self._begin(request)
        if early is not None:
            return early
        n = int(body.get("n_predict", 16))
        prompt_n = len(str(body.get("prompt", "")).split())
        reported = n - 1 if fault == "wrong_tokens" else n
        final = {
            "index": 0,
            "content": "" if body.get("stream") else "".join(f"t{i} " for i in range(n)),
            "tokens": [],
            "stop": True,
            "model": self.model,
            "tokens_predicted": reported,
            "tokens_evaluated": prompt_n,
            "truncated": fault == "truncated",
            "stop_type": "limit",
            "tokens_cached": prompt_n + n,
            "timings": {
                "cache_n": 0,
                "prompt_n": prompt_n,
                "prompt_ms": 1.5,
                "predicted_n": reported,
                "predicted_ms": 2.0 * n,
            },
        }
        if fault == "no_timings":
            del final["timings"]
        if not body.get("stream"):
            return web.json_response(final)
        if fault == "not_sse":
            return web.json_response(final)
        resp = await self._stream_start(request)
        for i in range(n):
            if fault == "cut" and i == n // 2:
                self._cut(request)
                return resp
            if fault == "malformed" and i == n // 2:
                await self._emit(resp, b"data: {not json\n\n")
            if fault == "wrong_shape" and i == n // 2:  # JSON, but a list, not an object
                await self._emit(resp, b"data: [1, 2]\n\n")
            if fault == "error_event" and i == n // 2:
                err = {"code": 500, "message": "Context size has been exceeded."}
                await self._emit(resp, _sse({"error": err}))
                return resp
            part = {"index": 0, "content": f"t{i} ", "tokens": [i], "stop": False}
            await self._emit(resp, _sse(part))
        if fault != "no_done":
            await self._emit(resp, _sse(final))
        return resp

    async def _openai(self, request: web.Request) -> web.StreamResponse:
        body, fault, early = await self._begin(request)
        if early is not None:
            return early
        chat = request.path.endswith("/chat/completions")
        n = int(body.get("max_tokens", 16))
        prompt = body["messages"][0]["content"] if chat else body.get("prompt", "")
        prompt_n = len(str(prompt).split())
        reported = n - 1 if fault == "wrong_tokens" else n
        finish = "length"
        usage: dict[str, Any] = {
            "completion_tokens": reported,
            "prompt_tokens": prompt_n,
            "total_tokens": prompt_n + reported,
        }
        if self.details:
            usage["prompt_tokens_details"] = {"cached_tokens": self._cached(str(prompt))}
        if self.usage_reasoning is not None:
            usage["completion_tokens_details"] = {"reasoning_tokens": self.usage_reasoning}
        timings = {"cache_n": 0, "prompt_n": prompt_n, "predicted_n": reported}
        obj = "chat.completion" if chat else "text_completion"
        thinking = min(self.reasoning, n)
        if not body.get("stream") or fault == "not_sse":
            text = "".join(f"t{i} " for i in range(thinking, n))
            answer: dict[str, Any] = {"content": text} if chat else {"text": text}
            if thinking:
                answer[self.reasoning_field] = "".join(f"r{i} " for i in range(thinking))
            choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
            choice.update({"message": {"role": "assistant", **answer}} if chat else answer)
            return web.json_response(
                {
                    "object": obj,
                    "model": self.model,
                    "choices": [choice],
                    "usage": usage,
                    "timings": timings,
                }
            )
        resp = await self._stream_start(request)
        if fault == "wrong_api":  # Anthropic's events where OpenAI's were asked
            for kind in ("message_start", "content_block_start", "message_stop"):
                await self._emit(resp, fakeapis.typed(kind, {"index": 0}))
            return resp
        if chat:
            first = {
                "index": 0,
                "delta": {"role": "assistant", "content": None},
                "finish_reason": None,
            }
            await self._emit(resp, _sse({"object": obj + ".chunk", "choices": [first]}))
        for i in range(n):
            if fault == "cut" and i == n // 2:
                self._cut(request)
                return resp
            if fault == "malformed" and i == n // 2:
                await self._emit(resp, b"data: {not json\n\n")
            if fault == "wrong_shape" and i == n // 2:  # JSON, but a list, not an object
                await self._emit(resp, b"data: [1, 2]\n\n")
            if fault == "error_event" and i == n // 2:
                await self._emit(resp, _sse({"error": {"code": 500, "message": "boom"}}))
                return resp
            part: dict[str, Any]
            if i < thinking:  # thinking: no answer text yet
                said = {self.reasoning_field: f"r{i} "}
                part = {"delta": said} if chat else {"text": "", **said}
            else:
                part = {"delta": {"content": f"t{i} "}} if chat else {"text": f"t{i} "}
            part.update(index=0, finish_reason=None)
            await self._emit(resp, _sse({"object": obj, "choices": [part]}))
        last = {"delta": {}} if chat else {"text": ""}
        last.update(index=0, finish_reason=finish)
        await self._emit(resp, _sse({"object": obj, "choices": [last]}))
        include = (body.get("stream_options") or {}).get("include_usage")
        if include and fault != "no_usage":
            await self._emit(
                resp, _sse({"object": obj, "choices": [], "usage": usage, "timings": timings})
            )
        if fault != "no_done":
            await self._emit(resp, b"data: [DONE]\n\n")
        return resp
