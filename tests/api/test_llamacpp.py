"""llama.cpp's dialect reads its answers: stream events and whole answers -> AnswerFacts.

The full exchange over real servers is covered in tests/bench/client/test_endpoints.py;
these feed event payloads directly, as the SSE parser hands them over.
"""

from __future__ import annotations

import json

import pytest

from kvlab.api.dialects import ApiKind, dialect_of
from kvlab.api.facts import AnswerFacts, MalformedResponse

LLAMA = dialect_of(ApiKind.LLAMACPP_COMPLETION)


def _ev(obj: object) -> bytes:
    return json.dumps(obj).encode()


def test_llama_stream_partials_then_final() -> None:
    facts = AnswerFacts()
    first = [_ev({"content": "Hel", "tokens": [1, 2], "stop": False})]
    assert LLAMA.read_events(facts, first, 100) is False
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
    assert LLAMA.read_events(facts, rest, 250) is True
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
        facts = AnswerFacts()
        LLAMA.read_answer(facts, answer)
        assert facts.texts == ["hi"] and facts.cached is None


def test_error_event_is_malformed_but_earlier_text_keeps_its_time() -> None:
    facts = AnswerFacts()
    events = [_ev({"content": "ok", "stop": False}), _ev({"error": {"message": "boom"}})]
    with pytest.raises(MalformedResponse, match="boom"):
        LLAMA.read_events(facts, events, 42)
    assert facts.texts == ["ok"]
    assert facts.t_first_content == 42
