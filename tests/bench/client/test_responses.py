"""ResponseFacts: bodies and stream events of each API -> the facts a Record is built from.

The full exchange over real servers is covered in test_endpoints.py; these feed event
payloads directly, as the SSE parser hands them over.
"""

from __future__ import annotations

import json

import pytest

from kvlab.bench.client.responses import ERROR_EXCERPT_CHARS, MalformedResponse, ResponseFacts
from kvlab.bench.records import Outcome


def _ev(obj: object) -> bytes:
    return json.dumps(obj).encode()


def test_llama_stream_partials_then_final() -> None:
    facts = ResponseFacts()
    first = [_ev({"content": "Hel", "tokens": [1, 2], "stop": False})]
    assert facts.llama_events(first, 100) is False
    rest = [
        _ev({"content": "", "tokens": [3], "stop": False}),  # token with no text yet
        _ev({"content": "", "stop": False}),  # nothing generated: not a chunk
        _ev(
            {
                "content": "lo",  # held-back text flushed with the final event
                "stop": True,
                "tokens_evaluated": 7,
                "tokens_predicted": 3,
                "truncated": False,
                "stop_type": "limit",
                "timings": {"cache_n": 4},
                "tokens_cached": 10,
            }
        ),
        _ev({"content": "after the end", "stop": False}),  # ignored
    ]
    assert facts.llama_events(rest, 250) is True
    assert facts.texts == ["Hel", "lo"]
    assert facts.chunk_ns == [100, 250, 250]
    assert facts.chunk_tokens == [2, 1, 0]
    assert (facts.t_first_content, facts.t_last_content) == (100, 250)
    assert facts.saw_terminator is True
    assert (facts.prompt_tokens, facts.output, facts.cached) == (7, 3, 4)
    assert (facts.stop_type, facts.truncated) == ("limit", False)


def test_llama_cached_is_unknown_without_cache_n() -> None:
    """tokens_cached counts prompt + generated tokens left in the slot: it is never read
    as the cached prompt tokens (that made every row of a server without timings look
    like prefix reuse)."""
    for answer in ({"content": "hi", "tokens_cached": 9, "timings": {}},
                   {"content": "hi", "tokens_cached": 9}):
        facts = ResponseFacts()
        facts.llama_answer(answer)
        assert facts.texts == ["hi"] and facts.cached is None


def test_error_event_is_malformed_but_earlier_text_keeps_its_time() -> None:
    facts = ResponseFacts()
    events = [_ev({"content": "ok", "stop": False}), _ev({"error": {"message": "boom"}})]
    with pytest.raises(MalformedResponse, match="boom"):
        facts.llama_events(events, 42)
    assert facts.texts == ["ok"]
    assert facts.t_first_content == 42


def test_openai_chat_stream_with_usage_and_done() -> None:
    facts = ResponseFacts()
    events = [
        _ev({"choices": [{"delta": {"role": "assistant"}, "finish_reason": None}]}),
        _ev({"choices": [{"delta": {"content": "Hi"}, "finish_reason": None}]}),
        _ev({"choices": [{"delta": {}, "finish_reason": "length"}]}),
        _ev(
            {
                "choices": [],
                "usage": {
                    "prompt_tokens": 5,
                    "completion_tokens": 1,
                    "prompt_tokens_details": {"cached_tokens": 3},
                },
            }
        ),
    ]
    assert facts.openai_events(events, 10, chat=True) is False
    assert facts.openai_events([b"[DONE]"], 20, chat=True) is True
    assert facts.texts == ["Hi"]
    assert facts.chunk_ns == [10]
    assert facts.chunk_tokens == [None]
    assert facts.stop_type == "length"
    assert facts.saw_usage is True and facts.saw_terminator is True
    assert (facts.prompt_tokens, facts.output, facts.cached) == (5, 1, 3)


def test_openai_answers() -> None:
    facts = ResponseFacts()
    facts.openai_answer({"choices": [{"text": "yes", "finish_reason": "stop"}]}, chat=False)
    assert facts.texts == ["yes"] and facts.stop_type == "stop"
    assert facts.prompt_tokens is None  # no usage: the fact stays unknown
    with pytest.raises(MalformedResponse, match="no choices"):
        ResponseFacts().openai_answer({"choices": []}, chat=True)


def test_fail_cuts_the_error() -> None:
    facts = ResponseFacts()
    facts.fail(Outcome.HTTP_ERROR, "x" * (ERROR_EXCERPT_CHARS + 50))
    assert facts.outcome is Outcome.HTTP_ERROR
    assert facts.error == "x" * ERROR_EXCERPT_CHARS
