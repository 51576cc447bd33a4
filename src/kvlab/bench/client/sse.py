"""Incremental server-sent-events parser: network bytes in, event data payloads out.

Only what llama.cpp, vLLM and OpenAI-compatible servers use is kept: the ``data``
field. ``event``, ``id`` and ``retry`` fields are ignored, comment lines (``:`` pings)
are skipped, multi-line data is joined with ``\\n``, CRLF and lone CR line endings
are accepted, and an event split across reads is held until its blank line arrives.

It is built for throughput (a benchmark client must ingest >100k events/s): one
``bytes.split`` per read and a fast path for the common single-line
``data: ...`` event (with or without an ``event: <type>`` line before it); payloads are
returned as ``bytes``, and the API's dialect decodes
each (:func:`kvlab.api.wire.loads`).
"""

from __future__ import annotations

_DATA_PREFIX = b"data: "
_EVENT_PREFIX = b"event: "


class SSEParser:
    """Feed raw body bytes with :meth:`feed`; each call returns the completed payloads.

    At the end of the body call :meth:`close`: it returns an event whose lines were
    complete but whose closing blank line never came (lenient), and
    :attr:`cut_mid_line` tells whether the body stopped in the middle of a line.
    """

    __slots__ = ("_pending", "cut_mid_line")

    def __init__(self) -> None:
        self._pending = b""  # bytes after the last complete event (normalized)
        self.cut_mid_line = False

    def feed(self, data: bytes) -> list[bytes]:
        """Parse one network read; return the data payloads of every completed event."""
        buf = self._pending + data if self._pending else data
        if b"\r" in buf:
            buf = _normalize_newlines(buf)
        blocks = buf.split(b"\n\n")
        self._pending = blocks.pop()  # the incomplete tail; b"" on an exact boundary
        out: list[bytes] = []
        for block in blocks:
            # Fast paths: one "data: <payload>" line (llama.cpp, OpenAI chat), or an
            # "event: <type>" line before it (Responses, Anthropic Messages).
            if block[:6] == _DATA_PREFIX and b"\n" not in block:
                out.append(block[6:])
            elif block[:7] == _EVENT_PREFIX and (nl := block.find(b"\n")) > 0 \
                    and block[nl + 1:nl + 7] == _DATA_PREFIX and b"\n" not in block[nl + 1:]:
                out.append(block[nl + 7:])
            elif block:
                _parse_block(block, out)
        return out

    def close(self) -> list[bytes]:
        """End of body: return a last event whose lines were all terminated, if any."""
        tail, self._pending = self._pending, b""
        if tail.endswith(b"\r"):
            tail = tail[:-1] + b"\n"
        if not tail:
            return []
        out: list[bytes] = []
        if tail.endswith(b"\n"):
            _parse_block(tail[:-1], out)
        else:
            self.cut_mid_line = True
        return out


def _normalize_newlines(buf: bytes) -> bytes:
    """CRLF and CR -> LF; a CR at the very end is kept: the next read may bring its LF."""
    keep_cr = buf.endswith(b"\r")
    if keep_cr:
        buf = buf[:-1]
    buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return buf + b"\r" if keep_cr else buf


def _parse_block(block: bytes, out: list[bytes]) -> None:
    """Parse the lines of one or more events separated by blank lines (general path)."""
    data_lines: list[bytes] = []
    for line in block.split(b"\n"):
        if not line:
            if data_lines:
                out.append(b"\n".join(data_lines))
                data_lines = []
            continue
        if line[:1] == b":":
            continue  # comment, e.g. llama.cpp's keep-alive ping
        name, _, value = line.partition(b":")
        if name == b"data":
            data_lines.append(value[1:] if value[:1] == b" " else value)
    if data_lines:
        out.append(b"\n".join(data_lines))
