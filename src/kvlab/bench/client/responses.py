"""Reading one answer: what a response said, accumulated into :class:`ResponseFacts`.

:class:`~kvlab.bench.client.endpoints.HarnessClient` owns the connection and the clock; this
module only interprets bodies and stream events of the three APIs (llama.cpp
``/completion``, OpenAI chat and completions) and keeps the facts a Record is built
from. Whatever breaks an API raises :class:`MalformedResponse` (the caller records
``Outcome.MALFORMED``); transport failures are recorded with :meth:`ResponseFacts.fail`.

The ``*_events`` methods are the hot path of the benchmark client (one call per network
read, >100k events/s): no per-event work besides the JSON decode and list appends.
"""

from __future__ import annotations

import json
from typing import Any

from kvlab.bench.client.sse import loads
from kvlab.bench.records import Outcome

ERROR_EXCERPT_CHARS = 300

# What reading JSON of the wrong shape raises: invalid JSON or UTF-8 (ValueError), a
# list where an object belongs (AttributeError), a number where a list belongs
# (TypeError), a missing key (KeyError). Caught around the parsing below only, and
# turned into MalformedResponse: a fault of the answer, never of kvlab's other code.
_SHAPE_ERRORS = (ValueError, AttributeError, TypeError, KeyError)


class MalformedResponse(Exception):
    """A body or event that breaks its API (-> Outcome.MALFORMED)."""


def malformed(exc: Exception) -> MalformedResponse:
    """The MalformedResponse of a shape error met while parsing an answer."""
    return MalformedResponse(f"{type(exc).__name__}: {exc}"[:ERROR_EXCERPT_CHARS])


class ResponseFacts:
    """What one exchange observed; turned into a Record at the end."""

    __slots__ = (
        "cached",
        "chunk_ns",
        "chunk_tokens",
        "error",
        "outcome",
        "output",
        "prompt_tokens",
        "read_lag_ns",
        "reasoning_chunks",
        "reasoning_texts",
        "saw_terminator",
        "saw_usage",
        "status",
        "stop_type",
        "t_first_answer",
        "t_first_chunk",
        "t_first_content",
        "t_headers",
        "t_last_content",
        "texts",
        "timings",
        "truncated",
        "usage_reasoning",
    )

    def __init__(self) -> None:
        self.outcome = Outcome.OK
        self.status: int | None = None
        self.error: str | None = None
        self.t_headers: int | None = None
        self.t_first_chunk: int | None = None
        self.t_first_content: int | None = None  # first output chunk, reasoning or answer
        self.t_first_answer: int | None = None  # first answer chunk
        self.t_last_content: int | None = None
        self.chunk_ns: list[int] = []
        self.chunk_tokens: list[int | None] = []
        self.reasoning_chunks: list[int] = []  # indexes into chunk_ns
        self.texts: list[str] = []  # the answer's pieces
        self.reasoning_texts: list[str] = []
        self.usage_reasoning: int | None = None
        self.prompt_tokens: int | None = None
        self.output: int | None = None
        self.cached: int | None = None
        self.stop_type: str | None = None
        self.truncated: bool | None = None
        self.timings: dict[str, Any] | None = None
        self.saw_terminator: bool | None = None
        self.saw_usage: bool | None = None
        self.read_lag_ns: int | None = None

    def fail(self, outcome: Outcome, error: str) -> None:
        """Record a failed exchange; the error text is cut to ``ERROR_EXCERPT_CHARS``."""
        self.outcome = outcome
        self.error = error[:ERROR_EXCERPT_CHARS]

    def record_fields(self) -> dict[str, Any]:
        """What the answer said, under the Record's names (the error excepted: the
        client redacts it)."""
        return {
            "t_headers": self.t_headers, "t_first_chunk": self.t_first_chunk,
            "t_first_content": self.t_first_content, "t_first_answer": self.t_first_answer,
            "t_last_content": self.t_last_content,
            "chunk_ns": self.chunk_ns, "chunk_tokens": self.chunk_tokens,
            "reasoning_chunks": self.reasoning_chunks,
            "read_lag_ns": self.read_lag_ns, "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output, "cached_tokens": self.cached,
            "stop_type": self.stop_type, "truncated": self.truncated,
            "timings": self.timings, "saw_terminator": self.saw_terminator,
            "saw_usage": self.saw_usage, "usage_reasoning_tokens": self.usage_reasoning,
            "outcome": self.outcome, "http_status": self.status,
            "text": "".join(self.texts), "reasoning_text": "".join(self.reasoning_texts),
            "notes": self.notes(),
        }

    def notes(self) -> list[str]:
        """What the answer said that is odd but no failure: a streamed answer whose
        usage counts other reasoning tokens than were streamed. An OpenAI delta does not
        say how many tokens it holds, so the streamed count (one per reasoning chunk) is
        a lower bound: a usage below it is wrong and the streamed count is used; a usage
        above it may be right (vLLM can put two tokens in one delta) and is kept."""
        streamed = len(self.reasoning_chunks)
        usage = self.usage_reasoning
        if self.saw_terminator is None or usage is None or usage == streamed:
            return []
        if usage < streamed:
            return [f"usage says {usage} reasoning tokens, {streamed} were streamed: "
                    "the streamed count is used"]
        return [f"usage says {usage} reasoning tokens, {streamed} reasoning chunks were "
                "streamed (a chunk may hold several tokens): the usage's count is kept"]

    # -- llama.cpp /completion ------------------------------------------------------

    def llama_answer(self, obj: dict[str, Any]) -> None:
        """Facts of a non-streamed llama.cpp answer (its text and server facts)."""
        try:
            if obj.get("content"):
                self.texts.append(obj["content"])
            self.llama_final(obj)
        except _SHAPE_ERRORS as exc:
            raise malformed(exc) from exc

    def llama_final(self, obj: dict[str, Any]) -> None:
        """Server facts of llama.cpp's final object (streamed) or whole answer."""
        self.prompt_tokens = obj.get("tokens_evaluated")
        self.output = obj.get("tokens_predicted")
        self.truncated = obj.get("truncated")
        self.stop_type = obj.get("stop_type")
        timings = obj.get("timings")
        self.timings = timings
        # cache_n is "prompt tokens reused", the same meaning as OpenAI's cached_tokens.
        # Without it the count is unknown: llama.cpp's tokens_cached is no substitute (it
        # counts prompt + generated tokens left in the slot, never 0 after an answer).
        self.cached = timings.get("cache_n") if isinstance(timings, dict) else None

    def llama_events(self, events: list[bytes], t: int) -> bool:
        """Handle llama.cpp stream events read at ``t``; True once the final event came."""
        # Hot path (one call per network read): list appends bound locally, no calls
        # per event besides the JSON decode.
        texts, chunk_ns, chunk_tokens = self.texts, self.chunk_ns, self.chunk_tokens
        had_text = len(texts)
        done = False
        try:
            for data in events:
                obj = loads(data)
                if obj.get("stop"):
                    self.llama_final(obj)
                    self.saw_terminator = done = True
                    content = obj.get("content")  # normally "" (already streamed), but a
                    if content:  # server may flush held-back text here, with no new token
                        texts.append(content)
                        chunk_ns.append(t)
                        chunk_tokens.append(len(obj.get("tokens") or ()))
                    break
                if "error" in obj:
                    raise MalformedResponse(json.dumps(obj["error"])[:ERROR_EXCERPT_CHARS])
                content = obj.get("content")
                tokens = obj.get("tokens")
                if content or tokens:
                    if content:
                        texts.append(content)
                    chunk_ns.append(t)
                    chunk_tokens.append(len(tokens) if tokens is not None else None)
        except _SHAPE_ERRORS as exc:
            raise malformed(exc) from exc
        finally:
            if len(texts) > had_text:  # also when an event was bad
                self._saw_output(t, answer=True)
        return done

    # -- OpenAI /v1/chat/completions and /v1/completions ----------------------------

    def openai_answer(self, obj: dict[str, Any], chat: bool) -> None:
        """Facts of a non-streamed OpenAI answer."""
        choices = obj.get("choices")
        if not isinstance(choices, list) or not choices:
            raise MalformedResponse("answer has no choices")
        try:
            choice = choices[0]
            where = (choice.get("message") or {}) if chat else choice
            text = where.get("content") if chat else where.get("text")
            if text:
                self.texts.append(text)
            reasoning = where.get("reasoning") or where.get("reasoning_content")
            if reasoning:
                self.reasoning_texts.append(reasoning)
            self.stop_type = choice.get("finish_reason")
            self.openai_usage(obj.get("usage"))
            if obj.get("timings") is not None:
                self.timings = obj["timings"]
        except _SHAPE_ERRORS as exc:
            raise malformed(exc) from exc

    def openai_usage(self, usage: Any) -> None:
        """Token counts of an OpenAI ``usage`` object; anything but a dict is ignored."""
        if not isinstance(usage, dict):
            return
        self.prompt_tokens = usage.get("prompt_tokens")
        self.output = usage.get("completion_tokens")  # reasoning tokens included
        details = usage.get("prompt_tokens_details")
        if isinstance(details, dict):
            self.cached = details.get("cached_tokens")
        completion = usage.get("completion_tokens_details")
        if isinstance(completion, dict):
            self.usage_reasoning = completion.get("reasoning_tokens")

    def openai_events(self, events: list[bytes], t: int, chat: bool) -> bool:
        """Handle OpenAI stream events read at ``t``; True once ``[DONE]`` came.

        A choice's answer is ``delta.content`` (chat) or ``text`` (completions); its
        reasoning, ``reasoning`` (vLLM) or ``reasoning_content`` (llama-server, older
        vLLM), is beside it. Either makes the event an output chunk."""
        texts, chunk_ns, chunk_tokens = self.texts, self.chunk_ns, self.chunk_tokens
        thoughts = self.reasoning_texts
        had_text, had_thought = len(texts), len(thoughts)
        done = False
        try:
            for data in events:
                if data == b"[DONE]":
                    self.saw_terminator = done = True
                    break
                obj = loads(data)
                choices = obj.get("choices")
                if choices:
                    choice = choices[0]
                    part = choice.get("delta") if chat else choice
                    if part:
                        content = part.get("content") if chat else part.get("text")
                        reasoning = part.get("reasoning") or part.get("reasoning_content")
                    else:
                        content = reasoning = None
                    if reasoning:
                        thoughts.append(reasoning)
                        self.reasoning_chunks.append(len(chunk_ns))
                    if content:
                        texts.append(content)
                    if content or reasoning:
                        chunk_ns.append(t)
                        chunk_tokens.append(None)  # OpenAI deltas do not say how many tokens
                    reason = choice.get("finish_reason")
                    if reason:
                        self.stop_type = reason
                elif "error" in obj:
                    raise MalformedResponse(json.dumps(obj["error"])[:ERROR_EXCERPT_CHARS])
                usage = obj.get("usage")
                if usage:
                    self.saw_usage = True
                    self.openai_usage(usage)
                timings = obj.get("timings")
                if timings is not None:
                    self.timings = timings  # llama.cpp puts them on the last chunk
        except _SHAPE_ERRORS as exc:
            raise malformed(exc) from exc
        finally:
            answer = len(texts) > had_text  # also when an event was bad
            if answer or len(thoughts) > had_thought:
                self._saw_output(t, answer)
        return done

    def _saw_output(self, t: int, answer: bool) -> None:
        """Output (reasoning or answer) arrived at ``t``; ``answer``: some of it answer."""
        if self.t_first_content is None:
            self.t_first_content = t
        if answer and self.t_first_answer is None:
            self.t_first_answer = t
        self.t_last_content = t
