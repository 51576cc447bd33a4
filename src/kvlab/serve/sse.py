"""Server-sent events: one ``data: <json>\\n\\n`` event per message."""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import StreamingResponse

DONE = b"data: [DONE]\n\n"  # the OpenAI stream terminator (llama.cpp /completion has none)


def event(obj: Any) -> bytes:
    """One SSE event holding ``obj`` as compact JSON."""
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def sse_response(events: Any) -> StreamingResponse:
    """A 200 event-stream response over an async iterator of encoded events."""
    return StreamingResponse(
        events,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
