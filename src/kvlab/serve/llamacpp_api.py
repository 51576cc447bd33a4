"""llama.cpp's native routes besides generation: /health, /props, /apply-template.

``/completion`` is served with every API's generation route by
:mod:`kvlab.serve.completions` (its events are :mod:`kvlab.api.llamacpp`'s);
``/tokenize`` and ``/detokenize``, in llama.cpp's and vLLM's dialects, are in
:mod:`kvlab.serve.tokenize`. Shapes follow llama-server (see
shared/reference/llamacpp-server.md).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from kvlab.serve.body import read_json_body
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
