"""Minimal HTTP/1.1 for the synthetic server: one asyncio Protocol per connection.

Only what benchmark clients send is understood: a request line, headers, a
``Content-Length`` body, keep-alive. Requests on one connection are answered one
after the other (clients here do not pipeline). Responses are written by the handler:
whole ones with :func:`http_response`, streams as chunked transfer encoding
(:meth:`Conn.write_chunk`) so the connection can be reused afterwards.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

Handler = Callable[["Conn", str, str, bytes], Awaitable[None]]

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 413: "Payload Too Large"}
MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 64 * 1024 * 1024


def http_response(status: int, obj: Any) -> bytes:
    """A complete JSON response with Content-Length (keep-alive)."""
    body = json.dumps(obj, separators=(",", ":")).encode()
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


class Conn(asyncio.Protocol):
    """One client connection: parses requests, hands them to ``handler`` in order."""

    def __init__(self, handler: Handler) -> None:
        self._handler = handler
        self._buf = b""
        self._busy = False
        self._close_after = False
        self._drain: asyncio.Future[None] | None = None
        self.transport: asyncio.Transport | None = None
        self.paused = False
        self.closed = False
        self._task: asyncio.Task[None] | None = None

    # -- asyncio.Protocol --------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self._buf += data
        if not self._busy:
            self._next_request()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._wake_drain()
        if self._task is not None and not self._task.done():
            self._task.cancel()

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self._wake_drain()

    # -- writing -------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        if not self.closed and self.transport is not None:
            self.transport.write(data)

    def write_chunk(self, payload: bytes) -> None:
        """One chunk of a chunked body (empty payloads are skipped: 0 ends a body)."""
        if payload:
            self.write(b"%x\r\n%b\r\n" % (len(payload), payload))

    async def drain(self) -> None:
        """Wait until the transport's buffer is below its high-water mark (or closed)."""
        while self.paused and not self.closed:
            self._drain = asyncio.get_running_loop().create_future()
            await self._drain

    def _wake_drain(self) -> None:
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)

    # -- parsing -------------------------------------------------------------------

    def _next_request(self) -> None:
        end = self._buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buf) > MAX_HEADER_BYTES:
                self._fail(413)
            return
        head = self._buf[:end].decode("latin-1").split("\r\n")
        try:
            method, target, version = head[0].split(" ", 2)
        except ValueError:
            self._fail(400)
            return
        headers = {}
        for line in head[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        try:
            length = int(headers.get("content-length", "0"))
        except ValueError:
            self._fail(400)
            return
        if length > MAX_BODY_BYTES:
            self._fail(413)
            return
        if len(self._buf) < end + 4 + length:
            return  # body not complete yet
        body = self._buf[end + 4 : end + 4 + length]
        self._buf = self._buf[end + 4 + length :]
        connection = headers.get("connection", "").lower()
        self._close_after = connection == "close" or (
            version == "HTTP/1.0" and connection != "keep-alive"
        )
        self._busy = True
        self._task = asyncio.get_running_loop().create_task(
            self._run(method, target, body)
        )

    async def _run(self, method: str, target: str, body: bytes) -> None:
        try:
            await self._handler(self, method, target, body)
        except asyncio.CancelledError:
            return
        if self.closed:
            return
        if self._close_after and self.transport is not None:
            self.transport.close()
            return
        self._busy = False
        if self._buf:
            self._next_request()

    def _fail(self, status: int) -> None:
        self.write(http_response(status, {"error": {"message": "bad request", "code": status}}))
        if self.transport is not None:
            self.transport.close()
