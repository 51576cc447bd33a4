"""The FastAPI application: routes, the loading gate, API-key checks, error shapes.

:func:`create_app` builds the app; the model loads on a background thread once the
server starts (llama.cpp starts listening before it loads), and until it is ready
every route, ``/health`` included, answers 503 ``Loading model``. With an API key,
every route but ``/health`` and ``/openapi.json`` (the contract, see
:mod:`kvlab.serve.openapi`) needs ``Authorization: Bearer <key>`` or
``X-Api-Key: <key>``; the key is never logged or echoed.

Generation is serialized, one slot (see :mod:`kvlab.serve.slot`), or continuously
batched over a paged KV cache (:mod:`kvlab.serve.batching`); ``/metrics`` shows the
load (:mod:`kvlab.serve.metrics`).
"""

from __future__ import annotations

import hmac
import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from kvlab.serve import completions, embeddings, llamacpp_api, metrics, openai_api, tokenize
from kvlab.serve.api_errors import INVALID_API_KEY, LOADING, ApiError, is_openai_path
from kvlab.serve.openapi import openapi_document
from kvlab.serve.state import ServerState, ServeSettings

log = logging.getLogger("kvlab.serve")
PUBLIC_PATHS = frozenset({"/health", "/v1/health", "/openapi.json"})


def create_app(
    settings: ServeSettings | None = None, load_gate: threading.Event | None = None
) -> FastAPI:
    """The kvlab server app. ConfigError if the settings do not fit the preset.

    ``load_gate`` (for tests): when given, loading waits until it is set, so the
    503-while-loading answers can be observed.
    """
    state = ServerState(settings or ServeSettings())

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        loader = threading.Thread(target=_load, args=(state, load_gate), daemon=True,
                                  name="kvlab-load")
        loader.start()
        yield
        state.slot.close()

    app = FastAPI(title="kvlab serve", lifespan=lifespan, docs_url=None, redoc_url=None,
                  openapi_url="/openapi.json")
    document = openapi_document(state.source.config.vocab_size)
    app.openapi = lambda: document  # type: ignore[method-assign]  # the hand-written contract
    app.state.kvlab = state
    app.include_router(llamacpp_api.router)
    app.include_router(tokenize.router)
    app.include_router(openai_api.router)
    app.include_router(completions.router)
    app.include_router(embeddings.router)
    app.include_router(metrics.router)
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _server_error)
    app.add_middleware(_Gate, state=state)
    return app


def _load(state: ServerState, gate: threading.Event | None) -> None:
    if gate is not None:
        gate.wait()
    try:
        state.slot.load()
    except BaseException as exc:  # the server answers 500 with this message from now on
        state.slot.load_error = exc
        log.error("kvlab serve: loading model %r failed: %s", state.model_id, exc)
        if state.on_load_error is not None:
            state.on_load_error()
        return
    log.info("kvlab serve: model %r loaded (n_ctx %d, kv cache %s)", state.model_id,
             state.n_ctx, "on" if state.settings.use_cache else "off")


class _Gate:
    """ASGI middleware: 503 while loading, then the API-key check (llama.cpp's order)."""

    def __init__(self, app: ASGIApp, state: ServerState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self._refusal(scope)
            if refusal is not None:
                await refusal.response(is_openai_path(scope["path"]))(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope) -> ApiError | None:
        slot = self.state.slot
        if slot.load_error is not None:
            return ApiError("server_error", f"the model failed to load: {slot.load_error}")
        if not slot.ready.is_set():
            return LOADING
        key = self.state.settings.api_key
        if key and scope["path"] not in PUBLIC_PATHS and not _authorized(scope, key):
            return INVALID_API_KEY
        return None


def _authorized(scope: Scope, key: str) -> bool:
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
    given = headers.get("x-api-key")
    auth = headers.get("authorization", "")
    if given is None and auth[:7].lower() == "bearer ":
        given = auth[7:].strip()
    return given is not None and hmac.compare_digest(given.encode(), key.encode())


async def _api_error(request: Request, exc: Any) -> JSONResponse:
    return exc.response(is_openai_path(request.url.path))


async def _http_error(request: Request, exc: Any) -> JSONResponse:
    """Routing errors: 404 as llama.cpp words it; 405 keeps Starlette's ``Allow``."""
    openai = is_openai_path(request.url.path)
    if exc.status_code == 404:
        return ApiError("not_found_error", "File Not Found").response(openai)
    if exc.status_code == 405:
        return ApiError("method_not_allowed",
                        f"{request.method} is not allowed on {request.url.path}"
                        ).response(openai, headers=exc.headers)
    error = ApiError("invalid_request_error", str(exc.detail))
    error.status = exc.status_code
    return error.response(openai, headers=exc.headers)


async def _server_error(request: Request, exc: Exception) -> JSONResponse:
    log.exception("kvlab serve: request failed")
    return ApiError("server_error", f"{type(exc).__name__}: {exc}").response(
        is_openai_path(request.url.path))
