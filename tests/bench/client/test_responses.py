"""ResponseFacts: a dialect's facts of an answer plus the transport's, under the Record's
names (reasoning chunks, and the notes a disagreeing usage leaves).

The full exchange over real servers is covered in test_endpoints.py; these feed event
payloads directly, as the SSE parser hands them over. What each dialect reads is
tested in tests/api/.
"""

from __future__ import annotations

import json

from kvlab.api.dialects import ApiKind, dialect_of
from kvlab.bench.client.responses import ERROR_EXCERPT_CHARS, ResponseFacts
from kvlab.rundir import Outcome

CHAT = dialect_of(ApiKind.OPENAI_CHAT)


def _ev(obj: object) -> bytes:
    return json.dumps(obj).encode()


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
    CHAT.read_events(facts, [_delta(role="assistant")], 5)  # role chunk: no output
    CHAT.read_events(facts, [_delta(reasoning="Let me")], 10)
    CHAT.read_events(facts, [_delta(reasoning=" think")], 20)
    CHAT.read_events(facts, [_delta(content="Paris"), _delta(content=".")], 30)
    CHAT.read_events(facts, [_usage(4, reasoning=2), b"[DONE]"], 40)
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
    assert CHAT.read_events(facts, events, 7) is True
    assert facts.reasoning_chunks == [0, 1, 2] and facts.texts == ["42"]
    assert facts.t_first_content == facts.t_first_answer == 7  # one read: one time
    assert facts.record_fields()["notes"] == [
        "usage says 0 reasoning tokens, 3 were streamed: the streamed count is used"]


def test_a_usage_above_the_reasoning_chunks_is_kept_and_noted() -> None:
    """vLLM may put two reasoning tokens in one delta: 2 chunks, usage 4."""
    facts = ResponseFacts()
    events = [_delta(reasoning="ab"), _delta(reasoning="cd"), _delta(content="42"),
              _usage(5, reasoning=4), b"[DONE]"]
    assert CHAT.read_events(facts, events, 7) is True
    assert facts.record_fields()["notes"] == [
        "usage says 4 reasoning tokens, 2 reasoning chunks were streamed (a chunk may "
        "hold several tokens): the usage's count is kept"]


def test_a_stream_that_is_all_reasoning_has_no_answer_time() -> None:
    facts = ResponseFacts()
    CHAT.read_events(facts, [_delta(reasoning="a"), _delta(reasoning="b"), b"[DONE]"], 3)
    assert facts.t_first_content == 3 and facts.t_first_answer is None
    assert facts.texts == [] and facts.reasoning_chunks == [0, 1]
    assert facts.record_fields()["notes"] == []  # no usage: nothing to disagree with


def test_a_whole_answer_keeps_its_reasoning_and_the_usage_count() -> None:
    facts = ResponseFacts()
    CHAT.read_answer(facts, {"choices": [{"message": {"content": "42", "reasoning": "think"},
                                      "finish_reason": "stop"}],
                         "usage": {"completion_tokens": 3,
                                   "completion_tokens_details": {"reasoning_tokens": 2}}})
    fields = facts.record_fields()
    assert (fields["text"], fields["reasoning_text"]) == ("42", "think")
    assert fields["usage_reasoning_tokens"] == 2
    assert fields["notes"] == []  # not streamed: nothing streamed to compare with


def test_a_stream_without_reasoning_keeps_the_facts_it_always_had() -> None:
    """No reasoning: every fact is what the parser gave before it read reasoning (the
    first answer token is the first token; no reasoning chunk; no note)."""
    facts = ResponseFacts()
    CHAT.read_events(facts, [_delta(role="assistant"), _delta(content="a")], 100)
    CHAT.read_events(facts, [_delta(content="b")], 250)
    CHAT.read_events(facts, [_delta(content="c"), _usage(3, reasoning=0), b"[DONE]"], 400)
    fields = facts.record_fields()
    assert {k: fields[k] for k in ("t_first_content", "t_last_content", "chunk_ns",
                                   "chunk_tokens", "text", "output_tokens")} == {
        "t_first_content": 100, "t_last_content": 400, "chunk_ns": [100, 250, 400],
        "chunk_tokens": [None] * 3, "text": "abc", "output_tokens": 3}
    assert fields["t_first_answer"] == 100
    assert (fields["reasoning_chunks"], fields["reasoning_text"], fields["notes"]) == (
        [], "", [])
