"""llama.cpp's own API: ``POST /completion`` (``/completions`` on the server too).

The body asks ``n_predict`` tokens. A stream sends one event per sampled token
``{content, tokens:[ids], stop:false, tokens_predicted, tokens_evaluated, ...}``
(``content`` is "" while a multi-byte character is incomplete), then a final event with
``stop:true`` and the server's facts: ``tokens_evaluated`` (prompt tokens),
``tokens_predicted``, ``truncated``, ``stop_type`` and ``timings``; no ``[DONE]``. A
whole answer is that final object with the whole ``content``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar

from kvlab.api.dialect import AnswerHead, Dialect, Finish
from kvlab.api.facts import (
    ERROR_EXCERPT_CHARS,
    SHAPE_ERRORS,
    AnswerFacts,
    MalformedResponse,
    malformed,
)
from kvlab.api.wire import event, json_str, loads


class LlamaCompletion(Dialect):
    """llama.cpp's ``/completion``."""

    kind = "llamacpp-completion"
    path = "/completion"
    routes: ClassVar[tuple[str, ...]] = ("/completion", "/completions")
    max_tokens_field = "n_predict"
    terminator = "the final stop event"

    def body(self, prompt: str, max_tokens: int, stream: bool,
             model: str | None) -> dict[str, Any]:
        return {"prompt": prompt, "n_predict": max_tokens, "stream": stream}

    # -- the answer (a client's side) -------------------------------------------------

    def read_answer(self, facts: AnswerFacts, obj: dict[str, Any]) -> None:
        try:
            if obj.get("content"):
                facts.texts.append(obj["content"])
            _final(facts, obj)
        except SHAPE_ERRORS as exc:
            raise malformed(exc) from exc

    def read_events(self, facts: AnswerFacts, events: list[bytes], t: int) -> bool:
        # Hot path (one call per network read): list appends bound locally, no calls
        # per event besides the JSON decode.
        texts, chunk_ns, chunk_tokens = facts.texts, facts.chunk_ns, facts.chunk_tokens
        had_text = len(texts)
        done = False
        try:
            for data in events:
                obj = loads(data)
                if obj.get("stop"):
                    _final(facts, obj)
                    facts.saw_terminator = done = True
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
        except SHAPE_ERRORS as exc:
            raise malformed(exc) from exc
        finally:
            if len(texts) > had_text:  # also when an event was bad
                facts.saw_output(t, answer=True)
        return done

    def usage_prompt_tokens(self, answer: dict[str, Any]) -> Any:
        return answer.get("tokens_evaluated")

    def event_tokens(self, obj: dict[str, Any]) -> int:
        return 0 if obj.get("stop") else len(obj.get("tokens") or ())

    # -- the answer (a server's side) -------------------------------------------------

    def token_event(self, head: AnswerHead, text: str, token_ids: Sequence[int],
                    n_predicted: int) -> bytes:
        return (b'data: {"index":0,"content":%s,"tokens":[%s],"stop":false,"id_slot":0,'
                b'"tokens_predicted":%d,"tokens_evaluated":%d}\n\n'
                % (json_str(text), ",".join(map(str, token_ids)).encode(), n_predicted,
                   head.n_prompt))

    def closing(self, head: AnswerHead, finish: Finish, include_usage: bool,
                extra: dict[str, Any] | None = None) -> bytes:
        # The text was streamed already; only the tail (a cut character) is left.
        return event({**_final_object(head, finish, finish.tail, ()), **(extra or {})})

    def whole(self, head: AnswerHead, finish: Finish) -> dict[str, Any]:
        return _final_object(head, finish, finish.text, finish.token_ids)


def _final(facts: AnswerFacts, obj: dict[str, Any]) -> None:
    """Server facts of the final object (streamed) or whole answer."""
    facts.prompt_tokens = obj.get("tokens_evaluated")
    facts.output = obj.get("tokens_predicted")
    facts.truncated = obj.get("truncated")
    facts.stop_type = obj.get("stop_type")
    timings = obj.get("timings")
    facts.timings = timings
    # cache_n is "prompt tokens reused", the same meaning as OpenAI's cached_tokens.
    # Without it the count is unknown: llama.cpp's tokens_cached is no substitute (it
    # counts prompt + generated tokens left in the slot, never 0 after an answer).
    facts.cached = timings.get("cache_n") if isinstance(timings, dict) else None


def _final_object(head: AnswerHead, finish: Finish, content: str,
                  token_ids: Sequence[int]) -> dict[str, Any]:
    """llama.cpp's final object (``stop:true``), with ``content`` and ``token_ids``."""
    return {
        "index": 0,
        "content": content,
        "tokens": list(token_ids),
        "id_slot": 0,
        "stop": True,
        "model": head.model,
        "tokens_predicted": finish.n_output,
        "tokens_evaluated": head.n_prompt,
        "generation_settings": finish.settings,
        "has_new_line": "\n" in finish.text,
        "truncated": finish.truncated,
        "stop_type": finish.stop_type,
        "stopping_word": "",
        "tokens_cached": finish.tokens_cached,
        "timings": finish.timings,
    }
