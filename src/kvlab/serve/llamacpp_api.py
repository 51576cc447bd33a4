"""llama.cpp's native routes: /health, /props, /apply-template, /completion
(``/tokenize`` and ``/detokenize``, in llama.cpp's and vLLM's dialects, are in
:mod:`kvlab.serve.tokenize`).

Shapes follow llama-server (see shared/reference/llamacpp-server.md): a streamed
``/completion`` sends one event per sampled token ``{content, tokens:[id], stop:false,
...}`` (content is "" while a multi-byte character is incomplete), then a final event
with ``stop:true``, ``content:""``, ``timings`` and the stop facts; no ``[DONE]``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import JSONResponse, Response

from kvlab.serve.api_errors import ApiError
from kvlab.serve.body import read_json_body
from kvlab.serve.generator import Finished, TokenEvent
from kvlab.serve.params import GenParams, parse_gen_params
from kvlab.serve.sse import event, sse_response
from kvlab.serve.state import ServerState

router = APIRouter()


def _state(request: Request) -> ServerState:
    return request.app.state.kvlab


@router.get("/health")
@router.get("/v1/health")
async def health() -> dict[str, str]:
    """200 once the model is loaded (the loading middleware answers 503 before)."""
    return {"status": "ok"}


@router.get("/props")
async def props(request: Request) -> dict[str, Any]:
    """Server and slot settings; ``kvlab`` holds the preset and the cache switch."""
    return _state(request).props()


@router.post("/apply-template")
async def apply_template(request: Request) -> dict[str, str]:
    """``{messages}`` -> ``{prompt}``: the chat prompt text, before tokenization (BOS
    is added then), as llama-server's route returns it."""
    body = await read_json_body(request)
    return {"prompt": _state(request).slot.chat.render(body)}


@router.post("/completion")
@router.post("/completions")
async def completion(request: Request) -> Response:
    """Generate from ``prompt`` (string or token ids), plain or streamed."""
    state = _state(request)
    body = await read_json_body(request)
    params = parse_gen_params(body, state.settings.seed)
    prompt_ids = state.prompt_ids(body.get("prompt"))
    state.check_fits(prompt_ids, params)
    if params.stream:
        return sse_response(_stream(state, prompt_ids, params))
    done = await run_to_end(state, prompt_ids, params)
    return JSONResponse(final_object(state, params, done, done.text, done.tokens))


async def run_to_end(state: ServerState, prompt_ids: list[int], params: GenParams) -> Finished:
    """Run a generation without streaming; its Finished record."""
    async for item in state.slot.generate(prompt_ids, params):
        if isinstance(item, Finished):
            return item
    raise ApiError("server_error", "the generation ended without a result")


def final_object(
    state: ServerState, params: GenParams, done: Finished, content: str, tokens: list[int]
) -> dict[str, Any]:
    """llama.cpp's final ``/completion`` object (``stop:true``)."""
    return {
        "index": 0,
        "content": content,
        "tokens": tokens,
        "id_slot": 0,
        "stop": True,
        "model": state.model_id,
        "tokens_predicted": len(done.tokens),
        "tokens_evaluated": done.n_prompt,
        "generation_settings": {**params.settings(), "n_ctx": state.n_ctx},
        "has_new_line": "\n" in done.text,
        "truncated": done.truncated,
        "stop_type": done.stop_type,
        "stopping_word": "",
        "tokens_cached": done.tokens_cached,
        "timings": done.timings.to_json(),
    }


async def _stream(
    state: ServerState, prompt_ids: list[int], params: GenParams
) -> AsyncIterator[bytes]:
    n_prompt = len(prompt_ids)
    n_sent = 0
    try:
        async for item in state.slot.generate(prompt_ids, params):
            if isinstance(item, TokenEvent):
                n_sent += 1
                yield event({
                    "index": 0, "content": item.text, "tokens": [item.token_id],
                    "stop": False, "id_slot": 0,
                    "tokens_predicted": n_sent, "tokens_evaluated": n_prompt,
                })
            else:
                # Text was streamed already; only a cut character's U+FFFD is left.
                yield event(final_object(state, params, item, item.tail, []))
    except Exception as exc:  # headers are out: report in-band, as llama.cpp does
        yield event(ApiError("server_error", f"generation failed: {exc}").body())
