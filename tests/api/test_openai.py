"""OpenAI's dialects read their answers: chat deltas and completion texts (reasoning
beside them), usage and whole answers -> AnswerFacts.

Payloads are fed directly, as the SSE parser hands them over; the reasoning cases that
end in a Record's notes are in tests/bench/client/test_responses.py.
"""

from __future__ import annotations

import json

import pytest

from kvlab.api.dialects import ApiKind, dialect_of
from kvlab.api.facts import AnswerFacts, MalformedResponse

CHAT = dialect_of(ApiKind.OPENAI_CHAT)
TEXT = dialect_of(ApiKind.OPENAI_COMPLETION)


def _ev(obj: object) -> bytes:
    return json.dumps(obj).encode()


def _delta(**delta: str) -> bytes:
    return _ev({"choices": [{"delta": delta, "finish_reason": None}]})


def test_openai_chat_stream_with_usage_and_done() -> None:
    facts = AnswerFacts()
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
    assert CHAT.read_events(facts, events, 10) is False
    assert CHAT.read_events(facts, [b"[DONE]"], 20) is True
    assert facts.texts == ["Hi"]
    assert facts.chunk_ns == [10]
    assert facts.chunk_tokens == [None]
    assert facts.stop_type == "length"
    assert facts.saw_usage is True and facts.saw_terminator is True
    assert (facts.prompt_tokens, facts.output, facts.cached) == (5, 1, 3)


def test_openai_answers() -> None:
    facts = AnswerFacts()
    TEXT.read_answer(facts, {"choices": [{"text": "yes", "finish_reason": "stop"}]})
    assert facts.texts == ["yes"] and facts.stop_type == "stop"
    assert facts.prompt_tokens is None  # no usage: the fact stays unknown
    with pytest.raises(MalformedResponse, match="no choices"):
        CHAT.read_answer(AnswerFacts(), {"choices": []})


def test_a_chunk_with_reasoning_and_answer_is_one_chunk_of_both() -> None:
    facts = AnswerFacts()
    CHAT.read_events(facts, [_delta(reasoning="so", content="yes")], 9)
    assert facts.chunk_ns == [9] and facts.reasoning_chunks == [0]
    assert facts.t_first_content == facts.t_first_answer == 9


def test_completions_reasoning_beside_text() -> None:
    facts = AnswerFacts()
    events = [_ev({"choices": [{"text": "", "reasoning": "r0"}]}),
              _ev({"choices": [{"text": "t1"}]}), b"[DONE]"]
    TEXT.read_events(facts, events[:1], 1)
    TEXT.read_events(facts, events[1:], 2)
    assert facts.chunk_ns == [1, 2] and facts.reasoning_chunks == [0]
    assert (facts.t_first_content, facts.t_first_answer) == (1, 2)
    assert facts.texts == ["t1"] and facts.reasoning_texts == ["r0"]
