"""Anthropic's Messages API: ``POST /v1/messages``, and ``/v1/messages/count_tokens``.

A request names ``model``, ``max_tokens`` (required by the API) and ``messages``
(``{role, content}``, content a string or text blocks; the system prompt is a field of
its own, ``system``), and authenticates with ``x-api-key`` beside an
``anthropic-version`` header. ``/v1/messages/count_tokens`` takes the same body without
``max_tokens`` and answers ``{"input_tokens": N}``: the prompt as the API counts it,
chat template included, with nothing generated.

A stream is typed events (``event: <type>`` and its ``data: {"type": ...}``):
``message_start`` (the message and a first usage), then per content block
``content_block_start``, ``content_block_delta`` (``text_delta``; ``thinking_delta`` for
a reasoning model's thinking, output for TTFT as in chat), ``content_block_stop``; then
``message_delta`` (``stop_reason`` and the final usage) and ``message_stop``, the
terminator. ``ping`` may come at any time, ``error`` ends a stream that failed.

Usage: ``input_tokens`` are the prompt tokens *not* read from a cache (Anthropic's
meaning), ``cache_read_input_tokens`` those read from it and
``cache_creation_input_tokens`` those written to it, so the prompt is their sum;
``output_tokens`` counts the answer. ``message_delta`` restates the counts it knows
(``output_tokens`` always), which win over ``message_start``'s.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar

from kvlab.api.dialect import AnswerHead, Dialect, Finish, Message
from kvlab.api.facts import (
    ERROR_EXCERPT_CHARS,
    SHAPE_ERRORS,
    AnswerFacts,
    MalformedResponse,
    malformed,
)
from kvlab.api.openai_responses import typed_event
from kvlab.api.sniff import ANTHROPIC_EVENTS, shape_of, unreadable
from kvlab.api.wire import json_str, loads

VERSION = "2023-06-01"  # the anthropic-version header every Messages request carries
STOP_REASONS = {"length": "max_tokens", "stop": "end_turn"}  # from OpenAI's finish reason


class AnthropicMessages(Dialect):
    """Anthropic's ``/v1/messages``."""

    kind = "anthropic-messages"
    path = "/v1/messages"
    routes: ClassVar[tuple[str, ...]] = ("/v1/messages",)
    chat = True
    prompt_field = "messages"
    needs_model = True
    max_tokens_field = "max_tokens"
    terminator = "message_stop"
    states_usage = True
    id_prefix = "msg_"
    count_path = "/v1/messages/count_tokens"

    # -- the request ----------------------------------------------------------------

    def body(self, prompt: str, max_tokens: int, stream: bool,
             model: str | None) -> dict[str, Any]:
        return {"model": model, "messages": [{"role": "user", "content": prompt}],
                "max_tokens": max_tokens, "stream": stream}

    def messages_fields(self, messages: Sequence[Message]) -> dict[str, Any]:
        """Anthropic has no system role in ``messages``: system messages become the
        ``system`` field."""
        system = [m["content"] for m in messages if m["role"] == "system"]
        fields: dict[str, Any] = {"messages": [dict(m) for m in messages
                                               if m["role"] != "system"]}
        if system:
            fields["system"] = "\n".join(system)
        return fields

    def headers(self, api_key: str | None) -> dict[str, str]:
        return {"anthropic-version": VERSION, **({"x-api-key": api_key} if api_key else {})}

    # -- the answer (a client's side) -------------------------------------------------

    def read_events(self, facts: AnswerFacts, events: list[bytes], t: int) -> bool:
        # Hot path (one call per network read): the deltas first, lists bound locally.
        texts, chunk_ns, chunk_tokens = facts.texts, facts.chunk_ns, facts.chunk_tokens
        thoughts = facts.reasoning_texts
        had_text, had_thought = len(texts), len(thoughts)
        done = False
        try:
            for data in events:
                obj = loads(data)
                kind = obj.get("type")
                if kind == "content_block_delta":
                    delta = obj["delta"]
                    what = delta.get("type")
                    if what == "text_delta" and delta.get("text"):
                        texts.append(delta["text"])
                    elif what == "thinking_delta" and delta.get("thinking"):
                        thoughts.append(delta["thinking"])
                        facts.reasoning_chunks.append(len(chunk_ns))
                    else:
                        continue  # signature, tool input, an empty piece: no output
                    chunk_ns.append(t)
                    chunk_tokens.append(None)  # a delta does not say how many tokens
                elif kind == "message_start":
                    message = obj["message"]
                    facts.response_id = message.get("id")
                    _usage(facts, message.get("usage"))
                elif kind == "content_block_start":
                    block = obj.get("content_block") or {}
                    facts.open_block = f"a {block.get('type')} block (index {obj.get('index')})"
                elif kind == "content_block_stop":
                    facts.open_block = None
                elif kind == "message_delta":
                    facts.stop_type = (obj.get("delta") or {}).get("stop_reason")
                    usage = obj.get("usage")
                    _usage(facts, usage)
                    facts.saw_usage = isinstance(usage, dict) \
                        and isinstance(usage.get("output_tokens"), int)
                    if obj.get("timings") is not None:
                        facts.timings = obj["timings"]
                elif kind == "message_stop":
                    facts.saw_terminator = done = True
                    break
                elif kind == "error" or (kind is None and "error" in obj):
                    raise MalformedResponse(json.dumps(obj.get("error"))
                                            [:ERROR_EXCERPT_CHARS])
                elif kind not in ANTHROPIC_EVENTS and (kind is None or shape_of(obj)):
                    raise unreadable(obj, self.kind, f"an event of type {kind!r}")
        except SHAPE_ERRORS as exc:
            raise malformed(exc) from exc
        finally:
            answer = len(texts) > had_text
            if answer or len(thoughts) > had_thought:
                facts.saw_output(t, answer)
        return done

    def read_answer(self, facts: AnswerFacts, obj: dict[str, Any]) -> None:
        if obj.get("type") == "error":
            raise MalformedResponse(json.dumps(obj.get("error"))[:ERROR_EXCERPT_CHARS])
        if obj.get("type") != "message" or not isinstance(obj.get("content"), list):
            raise unreadable(obj, self.kind, "the answer is not a message")
        try:
            facts.response_id = obj.get("id")
            for block in obj["content"]:
                if block.get("type") == "text" and block.get("text"):
                    facts.texts.append(block["text"])
                elif block.get("type") == "thinking" and block.get("thinking"):
                    facts.reasoning_texts.append(block["thinking"])
            facts.stop_type = obj.get("stop_reason")
            _usage(facts, obj.get("usage"))
            if obj.get("timings") is not None:
                facts.timings = obj["timings"]
        except SHAPE_ERRORS as exc:
            raise malformed(exc) from exc

    def usage_prompt_tokens(self, answer: dict[str, Any]) -> Any:
        usage = answer.get("usage")
        if not isinstance(usage, dict) or not isinstance(usage.get("input_tokens"), int):
            return None
        return sum(usage.get(k) or 0 for k in ("input_tokens", "cache_read_input_tokens",
                                               "cache_creation_input_tokens"))

    def event_tokens(self, obj: dict[str, Any]) -> int:
        if obj.get("type") != "content_block_delta":
            return 0
        delta = obj.get("delta") or {}
        return 1 if delta.get("text") or delta.get("thinking") else 0

    # -- the answer (a server's side) -------------------------------------------------

    def opening(self, head: AnswerHead) -> bytes:
        # The cache is not known yet: the whole prompt is stated as input, and
        # message_delta restates the usage once it is.
        message = {**self._message(head, []), "stop_reason": None,
                   "usage": {"input_tokens": head.n_prompt, "cache_read_input_tokens": 0,
                             "cache_creation_input_tokens": 0, "output_tokens": 0}}
        return (typed_event("message_start", {"message": message})
                + typed_event("content_block_start", {
                    "index": 0, "content_block": {"type": "text", "text": ""}}))

    def token_event(self, head: AnswerHead, text: str, token_ids: Sequence[int],
                    n_predicted: int) -> bytes:
        return (b'event: content_block_delta\ndata: {"type":"content_block_delta",'
                b'"index":0,"delta":{"type":"text_delta","text":%s}}\n\n' % json_str(text))

    def closing(self, head: AnswerHead, finish: Finish, include_usage: bool,
                extra: dict[str, Any] | None = None) -> bytes:
        # Messages always states its usage: include_usage is OpenAI chat's.
        tail = [] if not finish.tail else [typed_event("content_block_delta", {
            "index": 0, "delta": {"type": "text_delta", "text": finish.tail}})]
        return b"".join([
            *tail,
            typed_event("content_block_stop", {"index": 0}),
            typed_event("message_delta", {
                "delta": {"stop_reason": STOP_REASONS[finish.finish_reason],
                          "stop_sequence": None},
                "usage": _usage_of(head, finish), "timings": finish.timings}),
            typed_event("message_stop", dict(extra or {})),
        ])

    def whole(self, head: AnswerHead, finish: Finish) -> dict[str, Any]:
        return {**self._message(head, [{"type": "text", "text": finish.text}]),
                "stop_reason": STOP_REASONS[finish.finish_reason],
                "usage": _usage_of(head, finish), "timings": finish.timings}

    def error_event(self, error: dict[str, Any]) -> bytes:
        return typed_event("error", {"error": {"type": "api_error",
                                               "message": error.get("message")}})

    @staticmethod
    def _message(head: AnswerHead, content: list[dict[str, Any]]) -> dict[str, Any]:
        return {"id": head.id, "type": "message", "role": "assistant", "model": head.model,
                "content": content, "stop_sequence": None}

    # -- the request (a server's side) ------------------------------------------------

    def chat_request(self, body: dict[str, Any]) -> dict[str, Any]:
        """As llama-server converts it: ``system`` a system message, each message's
        text blocks its content, ``stop_sequences`` OpenAI's ``stop``; the other fields
        pass through (kvlab's ``ignore_eos``, ``seed`` and ``cache_prompt`` included,
        which llama-server drops)."""
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ValueError("'messages' is required and must be a non-empty array")
        if body.get("max_tokens") is None:
            raise ValueError("'max_tokens' is required")
        chat = {k: v for k, v in body.items()
                if k not in ("system", "messages", "stop_sequences", "metadata")}
        system = body.get("system")
        out = [] if system is None else [{"role": "system", "content": _text(system,
                                                                             "system")}]
        for i, message in enumerate(messages):
            if not isinstance(message, dict) or message.get("role") not in ("user",
                                                                             "assistant"):
                raise ValueError(f"messages[{i}].role must be 'user' or 'assistant'")
            out.append({"role": message["role"],
                        "content": _text(message.get("content"), f"messages[{i}].content")})
        chat["messages"] = out
        if body.get("stop_sequences") is not None:
            chat["stop"] = body["stop_sequences"]
        return chat


def _text(content: Any, where: str) -> str:
    """A string, or the text of text blocks; ValueError for anything else."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for block in content:
            if not (isinstance(block, dict) and block.get("type") == "text"
                    and isinstance(block.get("text"), str)):
                raise ValueError(f"{where}: only text blocks are supported")
            texts.append(block["text"])
        return "\n".join(texts)
    raise ValueError(f"{where} must be a string or an array of text blocks")


def _usage(facts: AnswerFacts, usage: Any) -> None:
    """The counts a ``usage`` object states, over what earlier events stated; the
    prompt is ``input_tokens`` + the cache's reads and writes."""
    if not isinstance(usage, dict):
        return
    known = facts.prompt_tokens is not None
    uncached = (facts.prompt_tokens or 0) - (facts.cached or 0) - (facts.cache_written or 0)
    if isinstance(usage.get("cache_read_input_tokens"), int):
        facts.cached = usage["cache_read_input_tokens"]
    if isinstance(usage.get("cache_creation_input_tokens"), int):
        facts.cache_written = usage["cache_creation_input_tokens"]
    if isinstance(usage.get("input_tokens"), int):
        uncached, known = usage["input_tokens"], True
    if known:
        facts.prompt_tokens = uncached + (facts.cached or 0) + (facts.cache_written or 0)
    if isinstance(usage.get("output_tokens"), int):
        facts.output = usage["output_tokens"]


def _usage_of(head: AnswerHead, finish: Finish) -> dict[str, int]:
    """The usage a server states: the prompt split into cached and not."""
    return {"input_tokens": head.n_prompt - finish.cached,
            "cache_read_input_tokens": finish.cached, "cache_creation_input_tokens": 0,
            "output_tokens": finish.n_output}
