"""The generation routes of every API dialect, served by one handler.

llama.cpp's ``/completion`` (and ``/completions``), OpenAI's ``/v1/completions`` and
``/v1/chat/completions`` (and ``/chat/completions``): each route's dialect
(:mod:`kvlab.api`) says what its body and answer look like; this module reads the
request, runs the generation and lets the dialect write the events, so there is one
stream loop for every API. Shapes follow llama-server (see
shared/reference/llamacpp-server.md): every ``/completion`` field (``ignore_eos``,
``seed``, ``n_predict``, ``cache_prompt``...) works on the OpenAI routes too, and the
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

from fastapi import APIRouter, Request
from starlette.responses import JSONResponse, Response

from kvlab import __version__
from kvlab.api.dialect import AnswerHead, Dialect, Finish
from kvlab.api.dialects import DIALECTS
from kvlab.serve.api_errors import ApiError
from kvlab.serve.body import read_json_body
from kvlab.serve.generator import Finished, TokenEvent
from kvlab.serve.params import GenParams, parse_gen_params
from kvlab.serve.sse import event, sse_response
from kvlab.serve.state import ServerState

router = APIRouter()
FINGERPRINT = f"kvlab-{__version__}"


async def complete(request: Request, dialect: Dialect) -> Response:
    """Generate from the request's prompt (or chat messages), whole or streamed."""
    state: ServerState = request.app.state.kvlab
    body = await read_json_body(request)
    params = parse_gen_params(body, state.settings.seed)
    field = dialect.prompt_field
    prompt = state.slot.chat.render(body) if dialect.chat else body.get(field)
    prompt_ids = state.prompt_ids(prompt, field)
    state.check_fits(prompt_ids, params)
    head = AnswerHead(id=dialect.id_prefix + uuid.uuid4().hex, created=int(time.time()),
                      model=state.model_id, fingerprint=FINGERPRINT,
                      n_prompt=len(prompt_ids))
    if params.stream:
        return sse_response(_stream(state, dialect, head, prompt_ids, params))
    done = await run_to_end(state, prompt_ids, params)
    return JSONResponse(dialect.whole(head, finish_of(state, params, done)))


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
                  prompt_ids: list[int], params: GenParams) -> AsyncIterator[bytes]:
    """The one stream loop: the dialect's opening, an event per token, its closing."""
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
                yield dialect.closing(head, finish_of(state, params, item),
                                      params.include_usage)
    except Exception as exc:  # headers are out: report in-band, as llama.cpp does
        yield event(ApiError("server_error", f"generation failed: {exc}").body())
    if dialect.done:
        yield dialect.done


def _handler(dialect: Dialect) -> Callable[[Request], Awaitable[Response]]:
    async def generate(request: Request) -> Response:
        return await complete(request, dialect)

    generate.__doc__ = f"Generate in {dialect.kind}'s dialect (kvlab.api)."
    return generate


for _dialect in DIALECTS.values():
    for _route in _dialect.routes:
        router.add_api_route(_route, _handler(_dialect), methods=["POST"],
                             name=f"{_dialect.kind}:{_route}")
