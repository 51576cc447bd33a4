"""Request bodies: size and nesting bounded, strict JSON, one object.

Every POST route reads its body through :func:`read_json_body`. The limits are part of
the server's contract (declared in ``/openapi.json``), and each refusal is a 400
``invalid_request_error`` in the route's API shape, before any generation starts
(so a request with ``"stream": true`` gets the 400 too, never a 200 and an error event):

- a body over :data:`MAX_BODY_BYTES`;
- nesting of arrays/objects deeper than :data:`MAX_DEPTH` (checked on the raw bytes
  before parsing, so a 100,000-level body costs a scan, not a recursion);
- non-standard JSON numbers: ``NaN``, ``Infinity``, ``-Infinity``, and literals that
  overflow a double (``1e400``) — JSON (RFC 8259) has no non-finite numbers;
- anything but a JSON object at the top.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from starlette.requests import Request

from kvlab.serve.api_errors import invalid_request

MAX_BODY_BYTES = 8 * 1024 * 1024  # 8 MiB: far above any prompt a preset's context takes
MAX_DEPTH = 32  # arrays/objects inside each other; chat bodies need 4

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')  # a JSON string, escapes included
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def nesting_depth(raw: bytes, limit: int = MAX_DEPTH) -> int:
    """The deepest nesting of ``[``/``{`` in ``raw`` outside strings; the scan stops
    once past ``limit`` (the answer is then ``limit + 1``)."""
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    depth = deepest = 0
    for byte in brackets:
        depth += 1 if byte in b"[{" else -1
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                break
    return deepest


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} overflows a double")
    return value


def parse_json_body(raw: bytes) -> dict[str, Any]:
    """The body as a JSON object (strict: finite numbers, bounded size and depth), or
    400 ``invalid_request_error``."""
    if len(raw) > MAX_BODY_BYTES:
        raise invalid_request(f"the request body is {len(raw)} bytes, over the limit of "
                              f"{MAX_BODY_BYTES} bytes")
    if nesting_depth(raw) > MAX_DEPTH:
        raise invalid_request(f"the request body nests arrays/objects deeper than "
                              f"{MAX_DEPTH} levels")
    try:
        body = json.loads(raw, parse_constant=_refuse_constant, parse_float=_finite)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise invalid_request(f"invalid JSON in request body: {exc}") from None
    if not isinstance(body, dict):
        raise invalid_request("the request body must be a JSON object")
    return body


async def read_json_body(request: Request) -> dict[str, Any]:
    """Read the body (at most :data:`MAX_BODY_BYTES`, whatever Content-Length says)
    and parse it with :func:`parse_json_body`."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise invalid_request(f"the request body is {declared} bytes, over the limit of "
                              f"{MAX_BODY_BYTES} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise invalid_request(f"the request body is over the limit of {MAX_BODY_BYTES} "
                                  "bytes")
        chunks.append(chunk)
    return parse_json_body(b"".join(chunks))
