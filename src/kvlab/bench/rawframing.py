"""HTTP/1.1 response framing for kvlab's own client: the head, then the body's bounds.

:func:`parse_head` reads a status line and headers; :class:`Framing` takes the body's
bytes as they come (any split) and removes ``Content-Length``, ``chunked`` (extensions
and trailers ignored) or read-until-close framing. Anything else is a
:class:`ProtocolError`.
"""

from __future__ import annotations

MAX_HEAD_BYTES = 64 * 1024
_HEX = b"0123456789abcdefABCDEF"


class ProtocolError(ValueError):
    """Bytes that are not an HTTP/1.x response."""


def parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    """(status, headers) of a response head without its blank line; header names
    lower-cased, a repeated one keeps its last value; HTTP/1.0 closes unless kept alive."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise ProtocolError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    if parts[0] == "HTTP/1.0" and "keep-alive" not in headers.get("connection", "").lower():
        headers.setdefault("connection", "close")
    return int(parts[1]), headers


class Framing:
    """Removes the HTTP body framing: Content-Length, chunked, or read until close."""

    __slots__ = ("_left", "_mode", "_pending", "empty", "keep_alive", "until_close")

    def __init__(self, mode: str, length: int, keep_alive: bool) -> None:
        self._mode = mode  # "length", "chunked" or "close"
        self._left = length  # length: body bytes still due; chunked: of this chunk
        self._pending = b""  # chunked: bytes of an incomplete size line or CRLF
        self.keep_alive = keep_alive and mode != "close"
        self.until_close = mode == "close"
        self.empty = mode == "length" and length == 0  # nothing to read at all

    @classmethod
    def of(cls, headers: dict[str, str], status: int) -> Framing:
        keep = "close" not in headers.get("connection", "").lower()
        if status in (204, 304):
            return cls("length", 0, keep)
        if "chunked" in headers.get("transfer-encoding", "").lower():
            return cls("chunked", -1, keep)
        if "content-length" in headers:
            text = headers["content-length"]
            if not (text.isascii() and text.isdigit() and len(text) <= 18):
                raise ProtocolError(f"bad Content-Length {text[:20]!r}")
            return cls("length", int(text), keep)
        return cls("close", 0, False)

    def feed(self, data: bytes) -> tuple[bytes, bool]:
        """(body bytes in ``data``, whether the body is complete)."""
        if self._mode == "length":
            take = data[: self._left]
            self._left -= len(take)
            return take, self._left == 0
        if self._mode == "close":
            return data, False
        return self._chunked(data)

    def _chunked(self, data: bytes) -> tuple[bytes, bool]:
        # _left > 0: bytes of the current chunk still due; -2: its CRLF is due; -1: a
        # size line is due; -3: after the last chunk, trailer lines until a blank one.
        buf = self._pending + data if self._pending else data
        self._pending = b""
        out: list[bytes] = []
        pos, n = 0, len(buf)
        while pos < n:
            if self._left > 0:
                take = buf[pos : pos + self._left]
                out.append(take)
                self._left -= len(take)
                pos += len(take)
                if self._left == 0:
                    self._left = -2
                continue
            if self._left == -2:
                if n - pos < 2:
                    self._pending = buf[pos:]
                    break
                if buf[pos : pos + 2] != b"\r\n":
                    raise ProtocolError("chunk not followed by CRLF")
                pos += 2
                self._left = -1
                continue
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                if n - pos > 1024:
                    raise ProtocolError("chunk size or trailer line over 1 KiB")
                self._pending = buf[pos:]
                break
            line, pos = buf[pos:eol], eol + 2
            if self._left == -3:
                if not line:
                    return b"".join(out), True  # the blank line after the last chunk
                continue  # a trailer field: ignored
            size_text = line.split(b";", 1)[0].strip()
            # int(x, 16) alone would take "-5", "+5", "0x5" and "5_0"
            if not (0 < len(size_text) <= 15 and size_text.strip(_HEX) == b""):
                raise ProtocolError(f"bad chunk size {size_text[:20]!r}")
            size = int(size_text, 16)
            self._left = size if size else -3
        return b"".join(out), False
