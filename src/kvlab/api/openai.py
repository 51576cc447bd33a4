"""What OpenAI's two generation APIs share: usage, the stream loop, the closing chunks.

A request names ``model`` and ``max_tokens``; a stream asks ``stream_options:
{include_usage: true}`` so that its last chunk before ``data: [DONE]`` states the
usage. Each chunk holds one choice; a choice's answer is its ``text`` (completions)
or ``delta.content`` (chat), and a reasoning model's thinking rides beside it as
``reasoning`` (vLLM) or ``reasoning_content`` (llama-server, older vLLM): both are
output, so either makes the chunk an output chunk, and chunks that carried reasoning
are kept apart. ``usage`` holds ``prompt_tokens``, ``completion_tokens`` (reasoning
included), ``prompt_tokens_details.cached_tokens`` and
``completion_tokens_details.reasoning_tokens``; llama-server adds ``timings``.

A server (kvlab serve, the synthetic server) ends a stream with a finish chunk, then,
when asked, a usage chunk whose ``choices`` is empty, as OpenAI's API says (OpenAI's
client and vLLM's ``bench serve`` read ``usage`` only from such a chunk); ``timings``
ride on the last chunk. The subclasses say where a choice holds its text.
"""

from __future__ import annotations

import json
from abc import abstractmethod
from typing import Any, ClassVar

from kvlab.api.dialect import AnswerHead, Dialect, Finish
from kvlab.api.facts import (
    ERROR_EXCERPT_CHARS,
    SHAPE_ERRORS,
    AnswerFacts,
    MalformedResponse,
    malformed,
)
from kvlab.api.sniff import unreadable
from kvlab.api.wire import DONE, event, loads


class OpenAIDialect(Dialect):
    """The part OpenAI's chat and completions share."""

    max_tokens_field = "max_tokens"
    needs_model = True
    terminator = "data: [DONE]"
    done = DONE
    states_usage = True
    part_key: ClassVar[str | None]  # a stream choice's output: choice[part_key]; None: it
    answer_key: ClassVar[str | None]  # a whole answer's: choice[answer_key]; None: it
    text_key: ClassVar[str]  # the answer's text in that part ("content", "text")
    chunk_object: ClassVar[str]  # "object" of a stream chunk
    answer_object: ClassVar[str]  # "object" of a whole answer

    def body(self, prompt: str, max_tokens: int, stream: bool,
             model: str | None) -> dict[str, Any]:
        body = {"model": model, **self.prompt_fields(prompt), "max_tokens": max_tokens,
                "stream": stream}
        if stream:
            body["stream_options"] = {"include_usage": True}
        return body

    def prompt_fields(self, prompt: str) -> dict[str, Any]:
        """The body fields that carry the prompt."""
        return {"prompt": prompt}

    # -- the answer (a client's side) -------------------------------------------------

    def read_answer(self, facts: AnswerFacts, obj: dict[str, Any]) -> None:
        choices = obj.get("choices")
        if not isinstance(choices, list) or not choices:
            raise MalformedResponse("answer has no choices")
        try:
            choice = choices[0]
            where = (choice.get(self.answer_key) or {}) if self.answer_key else choice
            text = where.get(self.text_key)
            if text:
                facts.texts.append(text)
            reasoning = where.get("reasoning") or where.get("reasoning_content")
            if reasoning:
                facts.reasoning_texts.append(reasoning)
            facts.stop_type = choice.get("finish_reason")
            _usage(facts, obj.get("usage"))
            if obj.get("timings") is not None:
                facts.timings = obj["timings"]
        except SHAPE_ERRORS as exc:
            raise malformed(exc) from exc

    def read_events(self, facts: AnswerFacts, events: list[bytes], t: int) -> bool:
        # Hot path (one call per network read): lists and keys bound locally.
        texts, chunk_ns, chunk_tokens = facts.texts, facts.chunk_ns, facts.chunk_tokens
        thoughts = facts.reasoning_texts
        part_key, text_key = self.part_key, self.text_key
        had_text, had_thought = len(texts), len(thoughts)
        done = False
        try:
            for data in events:
                if data == b"[DONE]":
                    facts.saw_terminator = done = True
                    break
                obj = loads(data)
                choices = obj.get("choices")
                if choices:
                    choice = choices[0]
                    part = choice.get(part_key) if part_key else choice
                    if part:
                        content = part.get(text_key)
                        reasoning = part.get("reasoning") or part.get("reasoning_content")
                    else:
                        content = reasoning = None
                    if reasoning:
                        thoughts.append(reasoning)
                        facts.reasoning_chunks.append(len(chunk_ns))
                    if content:
                        texts.append(content)
                    if content or reasoning:
                        chunk_ns.append(t)
                        chunk_tokens.append(None)  # OpenAI deltas do not say how many tokens
                    reason = choice.get("finish_reason")
                    if reason:
                        facts.stop_type = reason
                elif "error" in obj:
                    raise MalformedResponse(json.dumps(obj["error"])[:ERROR_EXCERPT_CHARS])
                elif "usage" not in obj and "type" in obj:  # not a chunk: whose is it?
                    raise unreadable(obj, self.kind, "an event without choices")
                usage = obj.get("usage")
                if usage:
                    facts.saw_usage = True
                    _usage(facts, usage)
                timings = obj.get("timings")
                if timings is not None:
                    facts.timings = timings  # llama.cpp puts them on the last chunk
        except SHAPE_ERRORS as exc:
            raise malformed(exc) from exc
        finally:
            answer = len(texts) > had_text  # also when an event was bad
            if answer or len(thoughts) > had_thought:
                facts.saw_output(t, answer)
        return done

    def usage_prompt_tokens(self, answer: dict[str, Any]) -> Any:
        usage = answer.get("usage")
        return usage.get("prompt_tokens") if isinstance(usage, dict) else None

    def event_tokens(self, obj: dict[str, Any]) -> int:
        choices = obj.get("choices")
        if not choices:
            return 0
        part = choices[0].get(self.part_key) if self.part_key else choices[0]
        return 1 if part and (part.get(self.text_key) or part.get("reasoning")
                              or part.get("reasoning_content")) else 0

    # -- the answer (a server's side) -------------------------------------------------

    def closing(self, head: AnswerHead, finish: Finish, include_usage: bool,
                extra: dict[str, Any] | None = None) -> bytes:
        chunks = [self._chunk(head, c) for c in self.finish_choices(finish)]
        if include_usage:
            chunks.append({**self._chunk(head, None), "usage": usage_of(head, finish)})
        chunks[-1].update(timings=finish.timings, **(extra or {}))
        return b"".join(event(c) for c in chunks)

    def whole(self, head: AnswerHead, finish: Finish) -> dict[str, Any]:
        return {**_head_fields(head), "object": self.answer_object,
                "choices": [self.whole_choice(finish)], "usage": usage_of(head, finish),
                "timings": finish.timings}

    @abstractmethod
    def finish_choices(self, finish: Finish) -> list[dict[str, Any]]:
        """The choice of each chunk that ends a stream: what text is left, then the
        finish_reason."""

    @abstractmethod
    def whole_choice(self, finish: Finish) -> dict[str, Any]:
        """The one choice of a whole answer."""

    def _chunk(self, head: AnswerHead, choice: dict[str, Any] | None) -> dict[str, Any]:
        """A stream chunk with one choice (None: no choice, a usage chunk)."""
        return {**_head_fields(head), "object": self.chunk_object,
                "choices": [] if choice is None else [choice]}


def _head_fields(head: AnswerHead) -> dict[str, Any]:
    return {"id": head.id, "created": head.created, "model": head.model,
            "system_fingerprint": head.fingerprint}


def usage_of(head: AnswerHead, finish: Finish) -> dict[str, Any]:
    """The usage object a server states for an answer."""
    return {"completion_tokens": finish.n_output, "prompt_tokens": head.n_prompt,
            "total_tokens": head.n_prompt + finish.n_output,
            "prompt_tokens_details": {"cached_tokens": finish.cached}}


def _usage(facts: AnswerFacts, usage: Any) -> None:
    """Token counts of a ``usage`` object; anything but a dict is ignored."""
    if not isinstance(usage, dict):
        return
    facts.prompt_tokens = usage.get("prompt_tokens")
    facts.output = usage.get("completion_tokens")  # reasoning tokens included
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict):
        facts.cached = details.get("cached_tokens")
    completion = usage.get("completion_tokens_details")
    if isinstance(completion, dict):
        facts.usage_reasoning = completion.get("reasoning_tokens")
