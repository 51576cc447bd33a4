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


def _delta(**delta: str) -> bytes:
    return _ev({"choices": [{"delta": delta, "finish_reason": None}]})


def _usage(completion: int, reasoning: int | None = None) -> bytes:
    usage: dict[str, object] = {"prompt_tokens": 5, "completion_tokens": completion}
    if reasoning is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return _ev({"choices": [], "usage": usage})


def test_reasoning_deltas_are_output_chunks_and_the_answer_has_its_own_time() -> None:
    """vLLM 0.32 streams a reasoning parser's thinking as ``delta.reasoning``: the
    first token of any kind starts TTFT; the first answer token is its own time."""
    facts = ResponseFacts()
    facts.openai_events([_delta(role="assistant")], 5, chat=True)  # role chunk: no output
    facts.openai_events([_delta(reasoning="Let me")], 10, chat=True)
    facts.openai_events([_delta(reasoning=" think")], 20, chat=True)
    facts.openai_events([_delta(content="Paris"), _delta(content=".")], 30, chat=True)
    facts.openai_events([_usage(4, reasoning=2), b"[DONE]"], 40, chat=True)
    assert facts.chunk_ns == [10, 20, 30, 30]
    assert facts.chunk_tokens == [None] * 4
    assert facts.reasoning_chunks == [0, 1]
    assert (facts.t_first_content, facts.t_first_answer, facts.t_last_content) == (10, 30, 30)
    fields = facts.record_fields()
    assert (fields["text"], fields["reasoning_text"]) == ("Paris.", "Let me think")
    assert fields["output_tokens"] == 4 and fields["usage_reasoning_tokens"] == 2
    assert fields["notes"] == []  # the usage agrees with the two reasoning chunks


def test_reasoning_content_and_a_usage_that_disagrees_is_noted() -> None:
    """llama-server writes ``reasoning_content``; vLLM with a parser that counts no
    reasoning tokens says 0 in its usage although it streamed some."""
    facts = ResponseFacts()
    events = [_delta(reasoning_content="hmm"), _delta(reasoning_content="..."),
              _delta(reasoning_content="ok"), _delta(content="42"),
              _usage(4, reasoning=0), b"[DONE]"]
    assert facts.openai_events(events, 7, chat=True) is True
    assert facts.reasoning_chunks == [0, 1, 2] and facts.texts == ["42"]
    assert facts.t_first_content == facts.t_first_answer == 7  # one read: one time
    assert facts.record_fields()["notes"] == [
        "usage says 0 reasoning tokens, 3 were streamed: the streamed count is used"]


def test_a_usage_above_the_reasoning_chunks_is_kept_and_noted() -> None:
    """vLLM may put two reasoning tokens in one delta: 2 chunks, usage 4."""
    facts = ResponseFacts()
    events = [_delta(reasoning="ab"), _delta(reasoning="cd"), _delta(content="42"),
              _usage(5, reasoning=4), b"[DONE]"]
    assert facts.openai_events(events, 7, chat=True) is True
    assert facts.record_fields()["notes"] == [
        "usage says 4 reasoning tokens, 2 reasoning chunks were streamed (a chunk may "
        "hold several tokens): the usage's count is kept"]


def test_a_stream_that_is_all_reasoning_has_no_answer_time() -> None:
    facts = ResponseFacts()
    facts.openai_events([_delta(reasoning="a"), _delta(reasoning="b"), b"[DONE]"], 3,
                        chat=True)
    assert facts.t_first_content == 3 and facts.t_first_answer is None
    assert facts.texts == [] and facts.reasoning_chunks == [0, 1]
    assert facts.record_fields()["notes"] == []  # no usage: nothing to disagree with


def test_a_chunk_with_reasoning_and_answer_is_one_chunk_of_both() -> None:
    facts = ResponseFacts()
    facts.openai_events([_delta(reasoning="so", content="yes")], 9, chat=True)
    assert facts.chunk_ns == [9] and facts.reasoning_chunks == [0]
    assert facts.t_first_content == facts.t_first_answer == 9


def test_completions_reasoning_beside_text() -> None:
    facts = ResponseFacts()
    events = [_ev({"choices": [{"text": "", "reasoning": "r0"}]}),
              _ev({"choices": [{"text": "t1"}]}), b"[DONE]"]
    facts.openai_events(events[:1], 1, chat=False)
    facts.openai_events(events[1:], 2, chat=False)
    assert facts.chunk_ns == [1, 2] and facts.reasoning_chunks == [0]
    assert (facts.t_first_content, facts.t_first_answer) == (1, 2)
    assert facts.texts == ["t1"] and facts.reasoning_texts == ["r0"]


def test_a_whole_answer_keeps_its_reasoning_and_the_usage_count() -> None:
    facts = ResponseFacts()
    facts.openai_answer({"choices": [{"message": {"content": "42", "reasoning": "think"},
                                      "finish_reason": "stop"}],
                         "usage": {"completion_tokens": 3,
                                   "completion_tokens_details": {"reasoning_tokens": 2}}},
                        chat=True)
    fields = facts.record_fields()
    assert (fields["text"], fields["reasoning_text"]) == ("42", "think")
    assert fields["usage_reasoning_tokens"] == 2
    assert fields["notes"] == []  # not streamed: nothing streamed to compare with


def test_a_stream_without_reasoning_keeps_the_facts_it_always_had() -> None:
    """No reasoning: every fact is what the parser gave before it read reasoning (the
    first answer token is the first token; no reasoning chunk; no note)."""
    facts = ResponseFacts()
    facts.openai_events([_delta(role="assistant"), _delta(content="a")], 100, chat=True)
    facts.openai_events([_delta(content="b")], 250, chat=True)
    facts.openai_events([_delta(content="c"), _usage(3, reasoning=0), b"[DONE]"], 400,
                        chat=True)
    fields = facts.record_fields()
    assert {k: fields[k] for k in ("t_first_content", "t_last_content", "chunk_ns",
                                   "chunk_tokens", "text", "output_tokens")} == {
        "t_first_content": 100, "t_last_content": 400, "chunk_ns": [100, 250, 400],
        "chunk_tokens": [None] * 3, "text": "abc", "output_tokens": 3}
    assert fields["t_first_answer"] == 100
    assert (fields["reasoning_chunks"], fields["reasoning_text"], fields["notes"]) == (
        [], "", [])
