"""The fake server's OpenAI Responses and Anthropic Messages routes (tests/fakeserver.py).

Written by hand in the shapes llama-server sends (``event:`` lines, typed ``data``), not
with kvlab's own dialect writers, so a bug in a dialect cannot hide in the fake too.
Faults, per request (``fake_fault`` in the body) or for every request:

- ``cut``: the socket closed mid-answer (Messages: inside the text block, after its
  ``content_block_start`` and half the deltas);
- ``malformed``: one event that is not JSON;
- ``wrong_api``: the answer in OpenAI chat's stream shape (``choices`` chunks and
  ``[DONE]``), as a proxy routing the request to the wrong API would send it;
- ``error_event``: Anthropic's ``event: error``, Responses' ``response.failed``;
- ``no_done``: no ``message_stop`` / ``response.completed``;
- ``wrong_tokens``: the usage states one output token fewer than were sent;
- ``no_usage``: the final event without its usage.

``prefix_cache`` reports the words shared with the previous prompt as cached
(``cache_read_input_tokens``; ``input_tokens_details.cached_tokens``).
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

CHAT_CHUNK = {"object": "chat.completion.chunk", "choices": [
    {"index": 0, "delta": {"content": "t "}, "finish_reason": None}]}


def typed(kind: str, data: dict[str, Any]) -> bytes:
    """An SSE event with its event line, as llama-server writes Responses/Messages."""
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


def prompt_words(body: dict[str, Any]) -> str:
    """The text of a Messages or Responses body's prompt."""
    given = body.get("input", body.get("messages", ""))
    if isinstance(given, list):
        return " ".join(str(m.get("content", "")) for m in given if isinstance(m, dict))
    return str(given)


async def messages(server: Any, request: web.Request) -> web.StreamResponse:
    """``POST /v1/messages``."""
    body, fault, early = await server._begin(request)
    if early is not None:
        return early
    n = int(body.get("max_tokens", 16))
    text = prompt_words(body)
    cached = server._cached(text)
    prompt_n = len(text.split())
    usage = {"input_tokens": prompt_n - cached, "cache_read_input_tokens": cached,
             "output_tokens": n - 1 if fault == "wrong_tokens" else n}
    if not body.get("stream") or fault == "not_sse":
        return web.json_response({
            "id": "msg_1", "type": "message", "role": "assistant", "model": server.model,
            "content": [{"type": "text", "text": "".join(f"t{i} " for i in range(n))}],
            "stop_reason": "max_tokens", "usage": usage})
    resp = await server._stream_start(request)
    if fault == "wrong_api":
        return await _as_chat(server, resp, n)
    await server._emit(resp, typed("message_start", {"message": {
        "id": "msg_1", "type": "message", "role": "assistant", "content": [],
        "model": server.model, "stop_reason": None,
        "usage": {**usage, "output_tokens": 0}}}))
    await server._emit(resp, typed("content_block_start", {
        "index": 0, "content_block": {"type": "text", "text": ""}}))
    for i in range(n):
        if await _fault_at(server, request, resp, fault, i, n, typed(
                "error", {"error": {"type": "overloaded_error", "message": "boom"}})):
            return resp
        await server._emit(resp, typed("content_block_delta", {
            "index": 0, "delta": {"type": "text_delta", "text": f"t{i} "}}))
    await server._emit(resp, typed("content_block_stop", {"index": 0}))
    final: dict[str, Any] = {"delta": {"stop_reason": "max_tokens", "stop_sequence": None}}
    if fault != "no_usage":
        final["usage"] = {"output_tokens": usage["output_tokens"]}
    await server._emit(resp, typed("message_delta", final))
    if fault != "no_done":
        await server._emit(resp, typed("message_stop", {}))
    return resp


async def responses(server: Any, request: web.Request) -> web.StreamResponse:
    """``POST /v1/responses``."""
    body, fault, early = await server._begin(request)
    if early is not None:
        return early
    n = int(body.get("max_output_tokens", 16))
    text = prompt_words(body)
    cached = server._cached(text)
    prompt_n = len(text.split())
    out = n - 1 if fault == "wrong_tokens" else n
    answer = "".join(f"t{i} " for i in range(n))
    whole: dict[str, Any] = {
        "id": "resp_1", "object": "response", "status": "completed", "model": server.model,
        "output": [{"type": "message", "id": "msg_1", "role": "assistant", "content": [
            {"type": "output_text", "text": answer, "annotations": []}]}],
        "usage": {"input_tokens": prompt_n, "output_tokens": out,
                  "total_tokens": prompt_n + out,
                  "input_tokens_details": {"cached_tokens": cached}}}
    if not body.get("stream") or fault == "not_sse":
        return web.json_response(whole)
    resp = await server._stream_start(request)
    if fault == "wrong_api":
        return await _as_chat(server, resp, n)
    shell = {"id": "resp_1", "object": "response", "status": "in_progress"}
    await server._emit(resp, typed("response.created", {"response": shell}))
    await server._emit(resp, typed("response.in_progress", {"response": shell}))
    for i in range(n):
        if await _fault_at(server, request, resp, fault, i, n, typed(
                "response.failed", {"response": {**shell, "status": "failed", "error": {
                    "code": "server_error", "message": "boom"}}})):
            return resp
        await server._emit(resp, typed("response.output_text.delta", {
            "item_id": "msg_1", "delta": f"t{i} "}))
    await server._emit(resp, typed("response.output_text.done", {"text": answer}))
    if fault == "no_usage":
        del whole["usage"]
    if fault != "no_done":
        await server._emit(resp, typed("response.completed", {"response": whole}))
    return resp


async def _fault_at(server: Any, request: web.Request, resp: web.StreamResponse,
                    fault: str | None, i: int, n: int, error: bytes) -> bool:
    """Inject the request's fault halfway; True when the answer ends here."""
    if i != n // 2:
        return False
    if fault == "cut":
        server._cut(request)
        return True
    if fault == "malformed":
        await server._emit(resp, b"event: content_block_delta\ndata: {not json\n\n")
    if fault == "error_event":
        await server._emit(resp, error)
        return True
    return False


async def _as_chat(server: Any, resp: web.StreamResponse, n: int) -> web.StreamResponse:
    """The answer in OpenAI chat's stream shape: the wrong API."""
    for _ in range(n):
        await server._emit(resp, f"data: {json.dumps(CHAT_CHUNK)}\n\n".encode())
    await server._emit(resp, b"data: [DONE]\n\n")
    return resp


async def count_tokens(server: Any, request: web.Request) -> web.Response:
    """``POST /v1/messages/count_tokens``: the prompt's words and 2 for the template."""
    body = await request.json()
    server.requests.append({"path": request.path, "body": body,
                            "headers": dict(request.headers)})
    denied = server._denied(request)
    return denied or web.json_response({"input_tokens": len(prompt_words(body).split()) + 2})
