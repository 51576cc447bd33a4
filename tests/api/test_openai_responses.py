"""OpenAI Responses: the events llama-server and vLLM stream, read into facts; the
request as a server converts it; the failures and a wrong API's answer refused."""

from __future__ import annotations

import json

import pytest

from kvlab.api.dialects import ApiKind, dialect_of
from kvlab.api.facts import AnswerFacts, MalformedResponse, WrongApi
from kvlab.bench.client.sse import SSEParser

RESPONSES = dialect_of(ApiKind.OPENAI_RESPONSES)


def events(*objs: dict) -> list[bytes]:
    """The data payloads of typed events, as the client's parser hands them over."""
    raw = b"".join(f"event: {o['type']}\ndata: {json.dumps(o)}\n\n".encode() for o in objs)
    return SSEParser().feed(raw)


def completed(kind: str = "response.completed", **usage: object) -> dict:
    return {"type": kind, "response": {
        "id": "resp_7", "object": "response", "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "usage": {"input_tokens": 20, "output_tokens": 5,
                  "input_tokens_details": {"cached_tokens": 4},
                  "output_tokens_details": {"reasoning_tokens": 2}, **usage}},
            "timings": {"prompt_n": 16}}


def test_reasoning_and_answer_deltas_are_output_and_the_end_states_the_usage() -> None:
    facts = AnswerFacts()
    head = events({"type": "response.created", "response": {"id": "resp_7"}},
                  {"type": "response.reasoning_text.delta", "delta": "hm", "item_id": "rs"},
                  {"type": "response.reasoning_summary_text.delta", "delta": "so"})
    assert RESPONSES.read_events(facts, head, 10) is False
    assert RESPONSES.read_events(facts, events(
        {"type": "response.output_text.delta", "delta": "Hi", "item_id": "m"},
        {"type": "response.output_text.delta", "delta": "", "item_id": "m"},
        {"type": "response.output_text.done", "text": "Hi"}), 20) is False
    assert RESPONSES.read_events(facts, events(completed()), 30) is True
    assert (facts.t_first_content, facts.t_first_answer) == (10, 20)  # reasoning first
    assert facts.reasoning_texts == ["hm", "so"] and facts.texts == ["Hi"]
    assert facts.chunk_ns == [10, 10, 20] and facts.reasoning_chunks == [0, 1]
    assert (facts.prompt_tokens, facts.output, facts.cached, facts.usage_reasoning) == (
        20, 5, 4, 2)
    assert facts.saw_terminator and facts.saw_usage
    assert facts.response_id == "resp_7" and facts.stop_type == "max_output_tokens"
    assert facts.timings == {"prompt_n": 16}  # llama-server's, on the last event


def test_an_incomplete_response_ends_the_stream_too() -> None:
    facts = AnswerFacts()
    assert RESPONSES.read_events(facts, events(completed("response.incomplete")), 1)
    assert facts.output == 5


def test_a_last_event_without_usage_is_seen_and_said() -> None:
    facts = AnswerFacts()
    end = completed()
    del end["response"]["usage"]
    assert RESPONSES.read_events(facts, events(end), 1) is True
    assert facts.saw_usage is False and facts.output is None


@pytest.mark.parametrize("failure", [
    {"type": "error", "code": "server_error", "message": "boom"},
    {"type": "response.failed", "response": {"status": "failed",
                                             "error": {"message": "boom"}}},
    {"error": {"code": 500, "message": "boom"}},  # llama-server's in-band error
])
def test_a_failure_is_refused_with_what_the_server_said(failure: dict) -> None:
    facts = AnswerFacts()
    first = events({"type": "response.output_text.delta", "delta": "a"})
    raw = json.dumps(failure).encode()
    with pytest.raises(MalformedResponse, match="boom"):
        RESPONSES.read_events(facts, [*first, raw], 5)
    assert facts.texts == ["a"] and facts.t_first_content == 5  # what came is kept


def test_a_chat_chunk_is_another_apis_answer() -> None:
    chunk = {"object": "chat.completion.chunk", "choices": [{"delta": {"content": "a"}}]}
    with pytest.raises(WrongApi, match="openai-chat"):
        RESPONSES.read_events(AnswerFacts(), [json.dumps(chunk).encode()], 1)
    with pytest.raises(WrongApi, match="anthropic-messages"):
        RESPONSES.read_events(AnswerFacts(), [b'{"type": "message_start", "message": {}}'], 1)
    with pytest.raises(MalformedResponse):
        RESPONSES.read_events(AnswerFacts(), [b"{not json"], 1)


def test_a_whole_response_keeps_answer_and_reasoning_apart() -> None:
    facts = AnswerFacts()
    answer = completed()["response"]
    answer["output"] = [
        {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "hm"}]},
        {"type": "message", "content": [{"type": "output_text", "text": "Hi"}]}]
    RESPONSES.read_answer(facts, answer)
    assert (facts.texts, facts.reasoning_texts, facts.output) == (["Hi"], ["hm"], 5)
    assert RESPONSES.prompt_tokens(answer) == 20
    with pytest.raises(WrongApi):
        RESPONSES.read_answer(AnswerFacts(), {"object": "chat.completion", "choices": []})


def test_a_request_becomes_chat_messages_as_llama_server_converts_it() -> None:
    body = {"model": "m", "instructions": "be brief", "max_output_tokens": 9, "seed": 1,
            "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
                      {"type": "message", "role": "assistant", "content": "yes"}]}
    chat = RESPONSES.chat_request(body)
    assert chat["messages"] == [{"role": "system", "content": "be brief"},
                                {"role": "user", "content": "hi"},
                                {"role": "assistant", "content": "yes"}]
    assert (chat["max_tokens"], chat["seed"]) == (9, 1) and "input" not in chat
    assert RESPONSES.chat_request({"input": "hi"})["messages"] == [
        {"role": "user", "content": "hi"}]
    for bad, said in (({}, "'input' is required"), ({"input": 3}, "string or an array"),
                      ({"input": [{"type": "function_call"}]}, "message item"),
                      ({"input": "a", "previous_response_id": "r"}, "stores no responses")):
        with pytest.raises(ValueError, match=said):
            RESPONSES.chat_request(bad)


def test_a_continued_conversation_sends_the_new_input_and_the_id() -> None:
    fields = RESPONSES.continue_fields("resp_1", [{"role": "user", "content": "more"}])
    assert fields == {"input": [{"type": "message", "role": "user", "content": "more"}],
                      "previous_response_id": "resp_1", "store": True}
    with pytest.raises(ValueError, match="keeps no conversation"):
        dialect_of(ApiKind.OPENAI_CHAT).continue_fields("x", [])
