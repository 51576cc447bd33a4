"""Anthropic Messages: its typed events, usage split by the cache, headers, count body,
and the request as a server converts it."""

from __future__ import annotations

import json

import pytest

from kvlab.api.dialects import ApiKind, dialect_of
from kvlab.api.facts import AnswerFacts, MalformedResponse, WrongApi
from kvlab.bench.client.sse import SSEParser

MESSAGES = dialect_of(ApiKind.ANTHROPIC_MESSAGES)


def events(*objs: dict) -> list[bytes]:
    raw = b"".join(f"event: {o['type']}\ndata: {json.dumps(o)}\n\n".encode() for o in objs)
    return SSEParser().feed(raw)


START = {"type": "message_start", "message": {
    "id": "msg_9", "type": "message", "role": "assistant", "content": [],
    "usage": {"input_tokens": 8, "cache_read_input_tokens": 3, "output_tokens": 0}}}


def delta(kind: str, text: str, index: int = 0) -> dict:
    key = "text" if kind == "text_delta" else "thinking"
    return {"type": "content_block_delta", "index": index,
            "delta": {"type": kind, key: text}}


def test_a_stream_with_thinking_reads_as_output_and_the_usage_sums_the_prompt() -> None:
    facts = AnswerFacts()
    assert MESSAGES.read_events(facts, events(
        START, {"type": "ping"},
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "thinking", "thinking": ""}},
        delta("thinking_delta", "hm"),
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "signature_delta", "signature": ""}},
        {"type": "content_block_stop", "index": 0}), 10) is False
    assert MESSAGES.read_events(facts, events(
        {"type": "content_block_start", "index": 1,
         "content_block": {"type": "text", "text": ""}},
        delta("text_delta", "Hi", 1)), 20) is False
    assert facts.open_block == "a text block (index 1)"
    assert MESSAGES.read_events(facts, events(
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "max_tokens"},
         "usage": {"output_tokens": 2}},
        {"type": "message_stop"}), 30) is True
    assert (facts.t_first_content, facts.t_first_answer) == (10, 20)
    assert facts.reasoning_texts == ["hm"] and facts.texts == ["Hi"]
    assert facts.chunk_ns == [10, 20] and facts.reasoning_chunks == [0]
    assert (facts.prompt_tokens, facts.cached, facts.output) == (11, 3, 2)
    assert facts.stop_type == "max_tokens" and facts.response_id == "msg_9"
    assert facts.saw_terminator and facts.saw_usage and facts.open_block is None


def test_the_final_usage_restates_the_cache_over_message_starts() -> None:
    facts = AnswerFacts()
    MESSAGES.read_events(facts, events(
        {**START, "message": {**START["message"], "usage": {"input_tokens": 11}}},
        {"type": "message_delta", "delta": {}, "usage": {
            "input_tokens": 6, "cache_read_input_tokens": 4,
            "cache_creation_input_tokens": 1, "output_tokens": 3}},
        {"type": "message_stop"}), 1)
    assert (facts.prompt_tokens, facts.cached, facts.cache_written, facts.output) == (
        11, 4, 1, 3)


def test_a_message_delta_without_output_tokens_is_no_usage() -> None:
    facts = AnswerFacts()
    MESSAGES.read_events(facts, events(START, {"type": "message_delta", "delta": {}},
                                       {"type": "message_stop"}), 1)
    assert facts.saw_usage is False


def test_an_error_event_and_another_apis_answer_are_refused() -> None:
    facts = AnswerFacts()
    with pytest.raises(MalformedResponse, match="overloaded"):
        MESSAGES.read_events(facts, events(
            START, delta("text_delta", "a"),
            {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}), 5)
    assert facts.texts == ["a"]
    chunk = {"object": "chat.completion.chunk", "choices": [{"delta": {"content": "a"}}]}
    with pytest.raises(WrongApi, match="openai-chat"):
        MESSAGES.read_events(AnswerFacts(), [json.dumps(chunk).encode()], 1)
    with pytest.raises(WrongApi, match="openai-responses"):
        MESSAGES.read_events(AnswerFacts(), events(
            {"type": "response.output_text.delta", "delta": "a"}), 1)


def test_a_whole_message_and_its_usage() -> None:
    answer = {"id": "msg_1", "type": "message", "role": "assistant",
              "content": [{"type": "thinking", "thinking": "hm"},
                          {"type": "text", "text": "Hi"}],
              "stop_reason": "end_turn", "usage": {"input_tokens": 5,
                                                   "cache_read_input_tokens": 2,
                                                   "output_tokens": 4}}
    facts = AnswerFacts()
    MESSAGES.read_answer(facts, answer)
    assert (facts.texts, facts.reasoning_texts, facts.prompt_tokens, facts.output) == (
        ["Hi"], ["hm"], 7, 4)
    assert MESSAGES.prompt_tokens(answer) == 7
    with pytest.raises(WrongApi, match="openai-chat"):
        MESSAGES.read_answer(AnswerFacts(), {"object": "chat.completion",
                                             "choices": [{"message": {}}]})


def test_headers_carry_the_key_and_the_version_and_count_tokens_its_body() -> None:
    assert MESSAGES.headers("k") == {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    assert MESSAGES.headers(None) == {"anthropic-version": "2023-06-01"}
    assert dialect_of(ApiKind.OPENAI_CHAT).headers("k") == {"Authorization": "Bearer k"}
    assert MESSAGES.count_body("hi", "m") == {
        "model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert MESSAGES.counted({"input_tokens": 26}) == 26
    assert MESSAGES.counted({"input_tokens": True}) is None


def test_a_request_becomes_chat_messages() -> None:
    chat = MESSAGES.chat_request({
        "model": "m", "max_tokens": 4, "system": [{"type": "text", "text": "be brief"}],
        "stop_sequences": ["\n"], "ignore_eos": True,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
                                                  {"type": "text", "text": "b"}]}]})
    assert chat["messages"] == [{"role": "system", "content": "be brief"},
                                {"role": "user", "content": "a\nb"}]
    assert (chat["stop"], chat["ignore_eos"], chat["max_tokens"]) == (["\n"], True, 4)
    for bad, said in (({"messages": [{"role": "user", "content": "a"}]}, "max_tokens"),
                      ({"max_tokens": 1, "messages": []}, "non-empty"),
                      ({"max_tokens": 1, "messages": [{"role": "tool", "content": "a"}]},
                       "'user' or 'assistant'"),
                      ({"max_tokens": 1, "messages": [{"role": "user", "content": [
                          {"type": "image"}]}]}, "only text blocks")):
        with pytest.raises(ValueError, match=said):
            MESSAGES.chat_request(bad)
