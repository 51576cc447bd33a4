"""Server-sent events: one ``data: <json>\\n\\n`` event per message."""

from __future__ import annotations

from typing import Any

from starlette.responses import StreamingResponse

from kvlab.api.wire import event

__all__ = ["event", "sse_response"]


def sse_response(events: Any) -> StreamingResponse:
    """A 200 event-stream response over an async iterator of encoded events."""
    return StreamingResponse(
        events,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
