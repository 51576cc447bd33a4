"""The generation routes of every API dialect, served by one handler.

llama.cpp's ``/completion`` (and ``/completions``), OpenAI's ``/v1/completions``,
``/v1/chat/completions`` (and ``/chat/completions``) and ``/v1/responses``, Anthropic's
``/v1/messages`` (and ``/v1/messages/count_tokens``): each route's dialect
(:mod:`kvlab.api`) says what its body and answer look like; this module reads the
request (a Responses or Messages body converted to OpenAI chat's first, as llama-server
converts them), runs the generation and lets the dialect write the events, so there is
one stream loop for every API (embeddings: :mod:`kvlab.serve.embeddings`). Shapes
follow llama-server (see shared/reference/llamacpp-server.md): every ``/completion``
field (``ignore_eos``, ``seed``, ``n_predict``, ``cache_prompt``...) works on the other
routes too (llama-server drops them on ``/v1/messages``; kvlab serve does not), and the
model a request names is ignored. Chat messages become one prompt with the model's
chat template (:mod:`kvlab.serve.chat`), tokenized with BOS as a ``/completion`` prompt
is, so ``usage`` counts what llama-server counts.

OpenAI's usage chunk has no choice, as OpenAI's API says (vLLM's client re-tokenizes
the text otherwise); llama-server puts the usage of ``/v1/completions`` on its finish
chunk, kvlab follows OpenAI here.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import JSONResponse, Response

from kvlab import __version__
from kvlab.api.dialect import AnswerHead, Dialect, Finish, Message
from kvlab.api.dialects import DIALECTS
from kvlab.serve.api_errors import ApiError, invalid_request
from kvlab.serve.body import read_json_body
from kvlab.serve.generator import Finished, TokenEvent
from kvlab.serve.params import GenParams, parse_gen_params
from kvlab.serve.sse import sse_response
from kvlab.serve.state import ServerState

router = APIRouter()
FINGERPRINT = f"kvlab-{__version__}"


async def complete(request: Request, dialect: Dialect) -> Response:
    """Generate from the request's prompt (or chat messages), whole or streamed."""
    state: ServerState = request.app.state.kvlab
    raw, history = _continued(state, dialect, await read_json_body(request))
    body = as_chat(dialect, raw)
    if history:
        body["messages"] = history + body["messages"]
    params = parse_gen_params(body, state.settings.seed)
    prompt_ids = request_prompt_ids(state, dialect, body)
    state.check_fits(prompt_ids, params)
    head = AnswerHead(id=dialect.id_prefix + uuid.uuid4().hex, created=int(time.time()),
                      model=state.model_id, fingerprint=FINGERPRINT,
                      n_prompt=len(prompt_ids))
    stored = dialect.keeps_state and raw.get("store") is not False

    def keep(text: str) -> None:
        if stored:
            state.responses.remember(head.id, body["messages"], text)

    if params.stream:
        return sse_response(_stream(state, dialect, head, prompt_ids, params, keep))
    done = await run_to_end(state, prompt_ids, params)
    keep(done.text)
    return JSONResponse(dialect.whole(head, finish_of(state, params, done)))


def _continued(state: ServerState, dialect: Dialect, body: dict[str, Any]
               ) -> tuple[dict[str, Any], list[Message]]:
    """The body without ``previous_response_id`` and the stored conversation it named
    ([] when it named none; :mod:`kvlab.serve.response_store`)."""
    previous = body.get("previous_response_id") if dialect.keeps_state else None
    if previous is None:
        return body, []
    if not isinstance(previous, str):
        raise invalid_request("Field 'previous_response_id': expected a string")
    rest = {k: v for k, v in body.items() if k != "previous_response_id"}
    return rest, state.responses.conversation(previous)


def as_chat(dialect: Dialect, body: dict[str, Any]) -> dict[str, Any]:
    """The request in OpenAI's shape (Responses' ``input``, Anthropic's ``system``
    become messages: :meth:`~kvlab.api.dialect.Dialect.chat_request`); 400 when its API
    refuses it."""
    try:
        return dialect.chat_request(body)
    except ValueError as exc:
        raise invalid_request(str(exc)) from None


def request_prompt_ids(state: ServerState, dialect: Dialect, body: dict[str, Any]
                       ) -> list[int]:
    """The prompt's token ids: the chat messages through the template, or the prompt."""
    field = dialect.prompt_field
    prompt = state.slot.chat.render(body) if dialect.chat else body.get(field)
    return state.prompt_ids(prompt, field)


async def count_tokens(request: Request, dialect: Dialect) -> dict[str, int]:
    """``{"input_tokens": N}``: the prompt tokens the request would hold, its chat
    template included, with nothing generated (Anthropic's count_tokens)."""
    state: ServerState = request.app.state.kvlab
    body = await read_json_body(request)
    body.setdefault(dialect.max_tokens_field, 1)  # not counted, but the API needs it
    return {"input_tokens": len(request_prompt_ids(state, dialect, as_chat(dialect, body)))}


async def run_to_end(state: ServerState, prompt_ids: list[int], params: GenParams) -> Finished:
    """Run a generation without streaming; its Finished record."""
    async for item in state.slot.generate(prompt_ids, params):
        if isinstance(item, Finished):
            return item
    raise ApiError("server_error", "the generation ended without a result")


def finish_of(state: ServerState, params: GenParams, done: Finished) -> Finish:
    """The end of a generation as the dialects state it."""
    return Finish(text=done.text, tail=done.tail, n_output=len(done.tokens),
                  stop_type=done.stop_type, truncated=done.truncated,
                  cached=done.timings.cache_n, timings=done.timings.to_json(),
                  token_ids=done.tokens, settings={**params.settings(), "n_ctx": state.n_ctx},
                  tokens_cached=done.tokens_cached)


async def _stream(state: ServerState, dialect: Dialect, head: AnswerHead,
                  prompt_ids: list[int], params: GenParams,
                  keep: Callable[[str], None]) -> AsyncIterator[bytes]:
    """The one stream loop: the dialect's opening, an event per token, its closing;
    ``keep`` gets the whole answer's text."""
    opening = dialect.opening(head)
    if opening:
        yield opening
    n_sent = 0
    try:
        async for item in state.slot.generate(prompt_ids, params):
            if isinstance(item, TokenEvent):
                n_sent += 1
                yield dialect.token_event(head, item.text, (item.token_id,), n_sent)
            else:
                keep(item.text)
                yield dialect.closing(head, finish_of(state, params, item),
                                      params.include_usage)
    except Exception as exc:  # headers are out: report in-band, as llama.cpp does
        error = ApiError("server_error", f"generation failed: {exc}")
        yield dialect.error_event(error.body()["error"])
    if dialect.done:
        yield dialect.done


def _handler(dialect: Dialect) -> Callable[[Request], Awaitable[Response]]:
    async def generate(request: Request) -> Response:
        return await complete(request, dialect)

    generate.__doc__ = f"Generate in {dialect.kind}'s dialect (kvlab.api)."
    return generate


def _counter(dialect: Dialect) -> Callable[[Request], Awaitable[dict[str, int]]]:
    async def count(request: Request) -> dict[str, int]:
        return await count_tokens(request, dialect)

    count.__doc__ = f"Count a {dialect.kind} request's prompt tokens (kvlab.api)."
    return count


for _dialect in DIALECTS.values():
    if not _dialect.generates:  # embeddings: kvlab.serve.embeddings
        continue
    for _route in _dialect.routes:
        router.add_api_route(_route, _handler(_dialect), methods=["POST"],
                             name=f"{_dialect.kind}:{_route}")
    if _dialect.count_path:
        router.add_api_route(_dialect.count_path, _counter(_dialect), methods=["POST"],
                             name=f"{_dialect.kind}:{_dialect.count_path}")
