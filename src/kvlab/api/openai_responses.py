"""OpenAI's Responses API: ``POST /v1/responses`` (``/responses`` too).

The prompt is ``input``: one user message, or a conversation as input items (``{type:
"message", role, content}``, the form llama-server, vLLM and OpenAI all read); the
output length is ``max_output_tokens``. A request may continue a conversation the
server stored (``previous_response_id``: only the new input is sent).

A stream is typed events (``event: <type>`` and its ``data: {"type": ...}``), no
``[DONE]``: ``response.created``, ``response.in_progress``, ``response.output_item.added``
and ``response.content_part.added`` open it; each piece of the answer is a
``response.output_text.delta`` and each piece of a reasoning model's thinking a
``response.reasoning_text.delta`` (``response.reasoning_summary_text.delta`` too), both
output for TTFT as in chat; the text's ``.done`` events follow, and the stream ends with
``response.completed`` (or ``response.incomplete``, OpenAI's end of an answer cut by
``max_output_tokens``; vLLM and kvlab serve send ``response.completed`` with the status
``incomplete`` instead, the one end OpenAI's own client reads) holding the whole
response and its ``usage``: ``input_tokens``
(cached ones included), ``input_tokens_details.cached_tokens``, ``output_tokens``
(reasoning included) and ``output_tokens_details.reasoning_tokens``; llama-server adds
``timings``. ``error`` and ``response.failed`` are the server's failure. A whole answer
is the response object: ``output`` items (``message`` with ``output_text`` parts,
``reasoning`` with ``reasoning_text``) and the same usage.
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
from kvlab.api.sniff import shape_of, unreadable
from kvlab.api.wire import json_str, loads

ENDS = ("response.completed", "response.incomplete")  # a stream's last event
TEXT_DELTA = "response.output_text.delta"
REASONING_DELTAS = ("response.reasoning_text.delta", "response.reasoning_summary_text.delta")
FAILURES = ("error", "response.failed")


def typed_event(kind: str, data: dict[str, Any]) -> bytes:
    """One SSE event with its ``event:`` line, as OpenAI and Anthropic write them."""
    return (b"event: %s\ndata: %s\n\n"
            % (kind.encode(), json.dumps({"type": kind, **data},
                                         separators=(",", ":")).encode()))


class OpenAIResponses(Dialect):
    """OpenAI's ``/v1/responses``."""

    kind = "openai-responses"
    path = "/v1/responses"
    routes: ClassVar[tuple[str, ...]] = ("/v1/responses", "/responses")
    chat = True
    prompt_field = "input"
    needs_model = True
    max_tokens_field = "max_output_tokens"
    terminator = "response.completed"
    states_usage = True
    keeps_state = True
    id_prefix = "resp_"

    # -- the request ----------------------------------------------------------------

    def body(self, prompt: str, max_tokens: int, stream: bool,
             model: str | None) -> dict[str, Any]:
        return {"model": model, "input": _items([{"role": "user", "content": prompt}]),
                "max_output_tokens": max_tokens, "stream": stream}

    def messages_fields(self, messages: Sequence[Message]) -> dict[str, Any]:
        return {"input": _items(messages)}

    def continue_fields(self, previous_id: str, messages: Sequence[Message]
                        ) -> dict[str, Any]:
        return {"input": _items(messages), "previous_response_id": previous_id,
                "store": True}

    # -- the answer (a client's side) -------------------------------------------------

    def read_events(self, facts: AnswerFacts, events: list[bytes], t: int) -> bool:
        # Hot path (one call per network read): lists bound locally.
        texts, chunk_ns, chunk_tokens = facts.texts, facts.chunk_ns, facts.chunk_tokens
        thoughts = facts.reasoning_texts
        had_text, had_thought = len(texts), len(thoughts)
        done = False
        try:
            for data in events:
                obj = loads(data)
                kind = obj.get("type")
                if kind == TEXT_DELTA:
                    delta = obj["delta"]
                    if delta:
                        texts.append(delta)
                        chunk_ns.append(t)
                        chunk_tokens.append(None)  # a delta does not say how many tokens
                elif kind in REASONING_DELTAS:
                    delta = obj["delta"]
                    if delta:
                        thoughts.append(delta)
                        facts.reasoning_chunks.append(len(chunk_ns))
                        chunk_ns.append(t)
                        chunk_tokens.append(None)
                elif kind in ENDS:
                    facts.saw_usage = _response(facts, obj["response"], obj) or False
                    facts.saw_terminator = done = True
                    break
                elif kind in FAILURES or (kind is None and "error" in obj):
                    raise MalformedResponse(_failure(obj))
                elif not isinstance(kind, str):
                    raise unreadable(obj, self.kind, "an event without a type")
                elif not kind.startswith("response.") and shape_of(obj):
                    raise unreadable(obj, self.kind, f"an event of type {kind!r}")
        except SHAPE_ERRORS as exc:
            raise malformed(exc) from exc
        finally:
            answer = len(texts) > had_text
            if answer or len(thoughts) > had_thought:
                facts.saw_output(t, answer)
        return done

    def read_answer(self, facts: AnswerFacts, obj: dict[str, Any]) -> None:
        if obj.get("object") != "response" and not isinstance(obj.get("output"), list):
            raise unreadable(obj, self.kind, "the answer is not a response object")
        try:
            if obj.get("status") == "failed":
                raise MalformedResponse(_failure({"response": obj}))
            for item in obj.get("output") or ():
                kind = item.get("type")
                for part in item.get("content") or ():
                    text = part.get("text")
                    if not text:
                        continue
                    if kind == "message" and part.get("type") == "output_text":
                        facts.texts.append(text)
                    elif kind == "reasoning":
                        facts.reasoning_texts.append(text)
            _response(facts, obj, obj)
        except SHAPE_ERRORS as exc:
            raise malformed(exc) from exc

    def usage_prompt_tokens(self, answer: dict[str, Any]) -> Any:
        usage = answer.get("usage")
        return usage.get("input_tokens") if isinstance(usage, dict) else None

    def event_tokens(self, obj: dict[str, Any]) -> int:
        kind = obj.get("type")
        return 1 if (kind == TEXT_DELTA or kind in REASONING_DELTAS) and obj.get("delta") \
            else 0

    # -- the answer (a server's side) -------------------------------------------------

    def opening(self, head: AnswerHead) -> bytes:
        shell = _shell(head, "in_progress")
        return b"".join((
            typed_event("response.created", {"sequence_number": 0, "response": shell}),
            typed_event("response.in_progress", {"sequence_number": 1, "response": shell}),
            typed_event("response.output_item.added", {
                "sequence_number": 2, "output_index": 0,
                "item": {"id": _message_id(head), "type": "message",
                         "status": "in_progress", "role": "assistant", "content": []}}),
            typed_event("response.content_part.added", {
                "sequence_number": 3, "item_id": _message_id(head), "output_index": 0,
                "content_index": 0,
                "part": {"type": "output_text", "text": "", "annotations": []}}),
        ))

    def token_event(self, head: AnswerHead, text: str, token_ids: Sequence[int],
                    n_predicted: int) -> bytes:
        return (b'event: response.output_text.delta\ndata: {"type":"response.output_text.'
                b'delta","sequence_number":%d,"item_id":%s,"output_index":0,'
                b'"content_index":0,"delta":%s,"logprobs":[]}\n\n'
                % (3 + n_predicted, json_str(_message_id(head)), json_str(text)))

    def closing(self, head: AnswerHead, finish: Finish, include_usage: bool,
                extra: dict[str, Any] | None = None) -> bytes:
        # Responses always states its usage, on its last event: include_usage is chat's.
        n = 4 + finish.n_output
        item_id, part = _message_id(head), _part(finish.text)
        events = [] if not finish.tail else [typed_event(TEXT_DELTA, {
            "sequence_number": n, "item_id": item_id, "output_index": 0,
            "content_index": 0, "delta": finish.tail, "logprobs": []})]
        response = self.whole(head, finish)
        events += [
            typed_event("response.output_text.done", {
                "sequence_number": n + 1, "item_id": item_id, "output_index": 0,
                "content_index": 0, "text": finish.text, "logprobs": []}),
            typed_event("response.content_part.done", {
                "sequence_number": n + 2, "item_id": item_id, "output_index": 0,
                "content_index": 0, "part": part}),
            typed_event("response.output_item.done", {
                "sequence_number": n + 3, "output_index": 0,
                "item": response["output"][0]}),
            # response.completed whatever the status (vLLM's choice too): OpenAI's own
            # client takes a stream's final response from no other event
            typed_event("response.completed", {"sequence_number": n + 4,
                                               "response": response,
                                               "timings": finish.timings, **(extra or {})}),
        ]
        return b"".join(events)

    def whole(self, head: AnswerHead, finish: Finish) -> dict[str, Any]:
        # OpenAI's answer cut by max_output_tokens is "incomplete"; one that stopped on
        # its own, "completed".
        cut = finish.finish_reason == "length"
        return {
            **_shell(head, "incomplete" if cut else "completed"),
            "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
            "output": [{"id": _message_id(head), "type": "message", "status": "completed",
                        "role": "assistant", "content": [_part(finish.text)]}],
            "usage": {
                "input_tokens": head.n_prompt,
                "input_tokens_details": {"cached_tokens": finish.cached},
                "output_tokens": finish.n_output,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": head.n_prompt + finish.n_output,
            },
            "timings": finish.timings,
        }

    def error_event(self, error: dict[str, Any]) -> bytes:
        return typed_event("error", {"code": error.get("type"),
                                     "message": error.get("message"), "param": None})

    # -- the request (a server's side) ------------------------------------------------

    def chat_request(self, body: dict[str, Any]) -> dict[str, Any]:
        """llama-server's conversion: ``instructions`` a system message, ``input`` (a
        string, or input items of text) the messages, ``max_output_tokens`` the
        output length; the other fields pass through."""
        if body.get("previous_response_id"):
            raise ValueError("'previous_response_id': this server stores no responses; "
                             "send the whole conversation as input")
        if "input" not in body:
            raise ValueError("'input' is required")
        chat = {k: v for k, v in body.items()
                if k not in ("input", "instructions", "max_output_tokens", "store")}
        messages: list[dict[str, Any]] = []
        if body.get("instructions"):
            messages.append({"role": "system", "content": body["instructions"]})
        given = body["input"]
        if isinstance(given, str):
            messages.append({"role": "user", "content": given})
        elif isinstance(given, list):
            messages += [_message_of(item, i) for i, item in enumerate(given)]
        else:
            raise ValueError("'input' must be a string or an array of input items")
        chat["messages"] = messages
        if body.get("max_output_tokens") is not None:
            chat["max_tokens"] = body["max_output_tokens"]
        return chat


def _items(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages as Responses input items (``type: message``: llama-server reads an
    assistant's item only with it)."""
    return [{"type": "message", "role": m["role"], "content": m["content"]}
            for m in messages]


def _message_of(item: Any, i: int) -> dict[str, Any]:
    """One input item as a chat message (text only); ValueError for another item."""
    if not isinstance(item, dict) or not isinstance(item.get("role"), str) \
            or item.get("type", "message") != "message":
        raise ValueError(f"input[{i}] must be a message item with a string 'role' "
                         "(this server reads text messages only)")
    content = item.get("content")
    if isinstance(content, list):
        texts = []
        for part in content:
            if not (isinstance(part, dict) and part.get("type") in
                    ("input_text", "output_text", "text")
                    and isinstance(part.get("text"), str)):
                raise ValueError(f"input[{i}].content: only text parts are supported")
            texts.append(part["text"])
        content = "\n".join(texts)
    if not isinstance(content, str):
        raise ValueError(f"input[{i}].content must be a string or an array of text parts")
    return {"role": item["role"], "content": content}


def _response(facts: AnswerFacts, response: dict[str, Any], event: dict[str, Any]
              ) -> bool:
    """Facts of a response object (the last event's or a whole answer); True when it
    carried a usage object."""
    facts.response_id = response.get("id")
    details = response.get("incomplete_details")
    reason = details.get("reason") if isinstance(details, dict) else None
    facts.stop_type = reason or response.get("status")
    timings = event.get("timings", response.get("timings"))
    if timings is not None:
        facts.timings = timings
    usage = response.get("usage")
    if not isinstance(usage, dict):
        return False
    facts.prompt_tokens = usage.get("input_tokens")
    facts.output = usage.get("output_tokens")  # reasoning tokens included
    cached = usage.get("input_tokens_details")
    if isinstance(cached, dict):
        facts.cached = cached.get("cached_tokens")
    reasoning = usage.get("output_tokens_details")
    if isinstance(reasoning, dict):
        facts.usage_reasoning = reasoning.get("reasoning_tokens")
    return True


def _failure(obj: dict[str, Any]) -> str:
    """What an ``error`` or ``response.failed`` event (or llama-server's
    ``{"error": ...}``) says went wrong, in one excerpt."""
    response = obj.get("response")
    said = (response.get("error") if isinstance(response, dict) else None) \
        or obj.get("error") or {k: obj.get(k) for k in ("code", "message") if k in obj}
    return json.dumps(said)[:ERROR_EXCERPT_CHARS]


def _shell(head: AnswerHead, status: str) -> dict[str, Any]:
    return {"id": head.id, "object": "response", "created_at": head.created,
            "status": status, "model": head.model, "output": [], "usage": None}


def _message_id(head: AnswerHead) -> str:
    return "msg_" + head.id.removeprefix("resp_")


def _part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": []}
