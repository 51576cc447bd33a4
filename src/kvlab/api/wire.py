"""The bytes of a stream: one server-sent event written, one event's JSON read.

Both APIs stream server-sent events whose data is one JSON object (OpenAI's end with
``data: [DONE]``). :func:`event` writes one, :func:`loads` reads one payload (the hot
path of the benchmark client), :func:`json_str` is one JSON string for the byte
templates of token events (the synthetic server writes >100k of them a second).
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii  # the C encoder json.dumps uses
from typing import Any

DONE = b"data: [DONE]\n\n"  # the OpenAI stream terminator (llama.cpp's has none)


def event(obj: Any) -> bytes:
    """One SSE event holding ``obj`` as compact JSON."""
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def json_str(text: str) -> bytes:
    """``text`` as a JSON string literal (quotes included, non-ASCII escaped, as
    ``json.dumps`` writes it)."""
    return encode_basestring_ascii(text).encode()


# the C scanner behind json.loads (an attribute typeshed does not declare)
_scan_once = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def loads(payload: bytes) -> Any:
    """``json.loads`` for one event payload, about twice as fast on the common case.

    It calls the C scanner directly, skipping ``json.loads``'s encoding detection and
    whitespace regexes; anything unusual (surrounding whitespace, extra data, invalid
    JSON) falls back to ``json.loads``, so errors are the same ``ValueError``s.
    """
    text = payload.decode()
    try:
        obj, end = _scan_once(text, 0)
    except StopIteration:
        return json.loads(text)
    if end != len(text):
        return json.loads(text)
    return obj
