"""OpenAI-compatible routes besides generation: /v1/models (and /models).

``/v1/chat/completions`` and ``/v1/completions`` are served with every API's
generation route by :mod:`kvlab.serve.completions`; their events are
:mod:`kvlab.api.openai_chat`'s and :mod:`kvlab.api.openai_completion`'s.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request

from kvlab.serve.state import ServerState

router = APIRouter()


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
