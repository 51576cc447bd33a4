"""OpenAI-compatible routes: /v1/models, /v1/chat/completions, /v1/completions.

Shaped like llama-server's OpenAI layer, so every ``/completion`` field (``ignore_eos``,
``seed``, ``n_predict``, ``cache_prompt``...) works here too and the model name in the
request is ignored. Streams end with ``data: [DONE]``.

- chat stream: a first chunk with ``delta {role:"assistant", content:null}``, one
  content delta per sampled token, a chunk with ``delta {}`` and ``finish_reason``,
  then with ``stream_options.include_usage`` a chunk with ``choices:[]`` and
  ``usage``; ``timings`` rides on the last chunk.
- completions stream: one text chunk per token, a chunk with ``finish_reason``, then
  with ``stream_options.include_usage`` a chunk with ``choices:[]`` and ``usage``;
  ``timings`` rides on the last chunk.

The usage chunk has no choice, as OpenAI's API says: OpenAI's client and vLLM's
``bench serve`` read ``usage`` only from a chunk whose ``choices`` is empty (vLLM's
client re-tokenizes the text otherwise). llama-server puts the usage of
``/v1/completions`` on its finish chunk; kvlab follows OpenAI here.

Chat messages become one prompt with the model's chat template (:mod:`kvlab.serve.chat`),
tokenized with BOS as a ``/completion`` prompt is, so ``usage`` counts what llama-server
counts.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import JSONResponse, Response

from kvlab import __version__
from kvlab.serve.body import read_json_body
from kvlab.serve.generator import Finished, TokenEvent
from kvlab.serve.llamacpp_api import run_to_end
from kvlab.serve.params import GenParams, parse_gen_params
from kvlab.serve.sse import DONE, event, sse_response
from kvlab.serve.state import ServerState

router = APIRouter()
FINGERPRINT = f"kvlab-{__version__}"


def _state(request: Request) -> ServerState:
    return request.app.state.kvlab


@router.get("/v1/models")
@router.get("/models")
async def models(request: Request) -> dict[str, Any]:
    """The one served model; its id is the preset name."""
    state = _state(request)
    return {
        "object": "list",
        "data": [{
            "id": state.model_id,
            "object": "model",
            "created": int(time.time()),
            "owned_by": "kvlab",
            "meta": state.model_meta(),
        }],
    }


@router.post("/v1/chat/completions")
@router.post("/chat/completions")
async def chat_completions(request: Request) -> Response:
    """Chat: ``messages`` -> the template's prompt -> one assistant message."""
    return await _complete(request, chat=True)


@router.post("/v1/completions")
async def completions(request: Request) -> Response:
    """Text completion of ``prompt`` (string or token ids)."""
    return await _complete(request, chat=False)


async def _complete(request: Request, chat: bool) -> Response:
    state = _state(request)
    body = await read_json_body(request)
    params = parse_gen_params(body, state.settings.seed)
    prompt = state.slot.chat.render(body) if chat else body.get("prompt")
    prompt_ids = state.prompt_ids(prompt, "messages" if chat else "prompt")
    state.check_fits(prompt_ids, params)
    head = {
        "id": ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex,
        "created": int(time.time()),
        "model": state.model_id,
        "system_fingerprint": FINGERPRINT,
    }
    if params.stream:
        stream = _chat_stream if chat else _text_stream
        return sse_response(stream(state, prompt_ids, params, head))
    done = await run_to_end(state, prompt_ids, params)
    if chat:
        choice = {"index": 0, "finish_reason": _finish_reason(done),
                  "message": {"role": "assistant", "content": done.text}}
        obj = "chat.completion"
    else:
        choice = {"index": 0, "text": done.text, "logprobs": None,
                  "finish_reason": _finish_reason(done)}
        obj = "text_completion"
    return JSONResponse({**head, "object": obj, "choices": [choice], "usage": _usage(done),
                         "timings": done.timings.to_json()})


def _finish_reason(done: Finished) -> str:
    return "stop" if done.stop_type == "eos" else "length"


def _usage(done: Finished) -> dict[str, Any]:
    n_out = len(done.tokens)
    return {
        "completion_tokens": n_out,
        "prompt_tokens": done.n_prompt,
        "total_tokens": done.n_prompt + n_out,
        "prompt_tokens_details": {"cached_tokens": done.timings.cache_n},
    }


async def _chat_stream(
    state: ServerState, prompt_ids: list[int], params: GenParams, head: dict[str, Any]
) -> AsyncIterator[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        return {**head, "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield event(chunk({"role": "assistant", "content": None}, None))
    try:
        async for item in state.slot.generate(prompt_ids, params):
            if isinstance(item, TokenEvent):
                yield event(chunk({"content": item.text}, None))
                continue
            if item.tail:
                yield event(chunk({"content": item.tail}, None))
            last = chunk({}, _finish_reason(item))
            if params.include_usage:
                yield event(last)
                last = {**head, "object": "chat.completion.chunk", "choices": [],
                        "usage": _usage(item)}
            yield event({**last, "timings": item.timings.to_json()})
    except Exception as exc:  # headers are out: report in-band
        yield event({"error": {"code": 500, "type": "server_error",
                               "message": f"generation failed: {exc}"}})
    yield DONE


async def _text_stream(
    state: ServerState, prompt_ids: list[int], params: GenParams, head: dict[str, Any]
) -> AsyncIterator[bytes]:
    def chunk(text: str, finish: str | None) -> dict[str, Any]:
        return {**head, "object": "text_completion",
                "choices": [{"index": 0, "text": text, "logprobs": None,
                             "finish_reason": finish}]}

    try:
        async for item in state.slot.generate(prompt_ids, params):
            if isinstance(item, TokenEvent):
                yield event(chunk(item.text, None))
                continue
            last = chunk(item.tail, _finish_reason(item))
            if params.include_usage:
                yield event(last)
                last = {**head, "object": "text_completion", "choices": [],
                        "usage": _usage(item)}
            yield event({**last, "timings": item.timings.to_json()})
    except Exception as exc:  # headers are out: report in-band
        yield event({"error": {"code": 500, "type": "server_error",
                               "message": f"generation failed: {exc}"}})
    yield DONE
