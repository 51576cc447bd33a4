"""Which API an answer's JSON looks like, for the refusal of a server answering the
wrong one.

A dialect that meets an event or body it cannot read asks :func:`wrong_api`: when the
object has the unmistakable shape of another API (an OpenAI chat chunk's ``choices``, a
Responses event's ``response.*`` type, an Anthropic ``message_start``, llama.cpp's
``stop`` and ``tokens_predicted``), the answer is another API's and the client records
``wrong_api``; otherwise the object is simply malformed for its own API. The names are
the dialects' kinds (``openai-chat``...), so the refusal says what to set instead.
"""

from __future__ import annotations

from typing import Any

from kvlab.api.facts import MalformedResponse, WrongApi

ANTHROPIC_EVENTS = frozenset({
    "message_start", "content_block_start", "content_block_delta", "content_block_stop",
    "message_delta", "message_stop", "ping",
})


def shape_of(obj: Any) -> str | None:
    """The API whose shape ``obj`` (one decoded event or body) has; None: no known one.
    ``openai-chat`` covers OpenAI's completions too when a choice holds ``text``."""
    if not isinstance(obj, dict):
        return None
    kind = obj.get("type")
    if isinstance(kind, str):
        if kind.startswith("response.") or obj.get("object") == "response":
            return "openai-responses"
        if kind in ANTHROPIC_EVENTS or (kind == "message" and "content" in obj):
            return "anthropic-messages"
    if obj.get("object") == "response":
        return "openai-responses"
    choices = obj.get("choices")
    if isinstance(choices, list):
        first = choices[0] if choices and isinstance(choices[0], dict) else {}
        return "openai-completion" if "text" in first else "openai-chat"
    if obj.get("object") == "list" and isinstance(obj.get("data"), list):
        return "openai-embeddings"
    if "tokens_predicted" in obj or ("stop" in obj and "content" in obj):
        return "llamacpp-completion"
    return None


def unreadable(obj: Any, expected: str, what: str) -> MalformedResponse:
    """The exception for an object a dialect of ``expected`` cannot read: WrongApi
    when it is another API's (named), else MalformedResponse saying ``what`` was
    wrong."""
    found = shape_of(obj)
    if found is not None and found != expected:
        return WrongApi(f"the server answered in {found}'s shape, not {expected}'s "
                        f"(check the URL or set api = \"{found}\")")
    return MalformedResponse(what)
