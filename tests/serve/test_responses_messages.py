"""Responses and Messages on kvlab serve over real HTTP: the same prompt and tokens as
chat, their event sequences, count_tokens, stored responses and the 400s."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.serve.conftest import sse_events

GREEDY = {"temperature": 0, "seed": 42, "ignore_eos": True, "cache_prompt": False}
CHAT_PROMPT = "system: be brief\nuser: hi\nassistant: "  # kvlab's documented toy template


def post(base_url: str, path: str, body: dict) -> httpx.Response:
    return httpx.post(base_url + path, json=body, timeout=60)


def chat_text(base_url: str, n: int) -> str:
    out = post(base_url, "/v1/chat/completions", {
        "messages": [{"role": "system", "content": "be brief"},
                     {"role": "user", "content": "hi"}], "max_tokens": n, **GREEDY}).json()
    return out["choices"][0]["message"]["content"]


def test_a_response_is_chats_prompt_and_answer(base_url: str) -> None:
    out = post(base_url, "/v1/responses", {"instructions": "be brief", "input": "hi",
                                           "max_output_tokens": 5, **GREEDY}).json()
    assert out["object"] == "response" and out["status"] == "incomplete"
    assert out["incomplete_details"] == {"reason": "max_output_tokens"}
    (item,) = out["output"]
    assert item["content"][0]["text"] == chat_text(base_url, 5)
    assert out["usage"]["input_tokens"] == len(CHAT_PROMPT.encode())
    assert out["usage"]["output_tokens"] == 5


def test_a_response_stream_opens_deltas_then_completes(base_url: str) -> None:
    raw = httpx.post(base_url + "/v1/responses", timeout=60, json={
        "input": [{"role": "system", "content": "be brief"},
                  {"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
        "max_output_tokens": 4, "stream": True, **GREEDY}).text
    assert raw.startswith("event: response.created\n")
    events = [json.loads(e) for e in sse_events(raw)]
    kinds = [e["type"] for e in events]
    # one delta per token, and one more when the decoder flushes a cut character
    deltas = kinds.count("response.output_text.delta")
    assert kinds == ["response.created", "response.in_progress",
                     "response.output_item.added", "response.content_part.added",
                     *["response.output_text.delta"] * deltas, "response.output_text.done",
                     "response.content_part.done", "response.output_item.done",
                     "response.completed"] and deltas in (4, 5)
    assert [e["sequence_number"] for e in events] == sorted(e["sequence_number"]
                                                            for e in events)
    done = events[-1]["response"]
    assert done["usage"]["output_tokens"] == 4 and events[-1]["timings"]["predicted_n"] == 4
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert text == done["output"][0]["content"][0]["text"] == chat_text(base_url, 4)


def test_a_message_is_chats_prompt_and_answer(base_url: str) -> None:
    out = post(base_url, "/v1/messages", {
        "model": "toy", "system": "be brief", "max_tokens": 5,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        **GREEDY}).json()
    assert out["type"] == "message" and out["stop_reason"] == "max_tokens"
    assert out["content"] == [{"type": "text", "text": chat_text(base_url, 5)}]
    assert out["usage"] == {"input_tokens": len(CHAT_PROMPT.encode()),
                            "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0,
                            "output_tokens": 5}
    counted = post(base_url, "/v1/messages/count_tokens", {
        "model": "toy", "system": "be brief", "messages": [{"role": "user", "content": "hi"}]})
    assert counted.json() == {"input_tokens": len(CHAT_PROMPT.encode())}


def test_a_message_stream_is_anthropics_event_sequence(base_url: str) -> None:
    raw = httpx.post(base_url + "/v1/messages", timeout=60, json={
        "model": "toy", "max_tokens": 3, "stream": True,
        "messages": [{"role": "user", "content": "hi"}], **GREEDY}).text
    events = [json.loads(e) for e in sse_events(raw)]
    kinds = [e["type"] for e in events]
    deltas = kinds.count("content_block_delta")  # a flushed cut character adds one
    assert kinds == ["message_start", "content_block_start",
                     *["content_block_delta"] * deltas, "content_block_stop",
                     "message_delta", "message_stop"] and deltas in (3, 4)
    assert raw.count("event: ") == len(events)  # every event names its type
    assert events[-2]["usage"]["output_tokens"] == 3
    assert events[-2]["delta"]["stop_reason"] == "max_tokens"


def test_the_prompt_cache_is_reported_as_anthropics_cache_read(base_url: str) -> None:
    body = {"model": "toy", "max_tokens": 2, "temperature": 0, "ignore_eos": True,
            "messages": [{"role": "user", "content": "a long enough shared prompt"}]}
    post(base_url, "/v1/messages", {**body, "cache_prompt": True})
    again = post(base_url, "/v1/messages", {**body, "cache_prompt": True}).json()["usage"]
    assert again["cache_read_input_tokens"] > 0
    total = again["input_tokens"] + again["cache_read_input_tokens"]
    cold = post(base_url, "/v1/messages", {**body, "cache_prompt": False}).json()["usage"]
    assert cold == {**cold, "cache_read_input_tokens": 0, "input_tokens": total}


def test_a_stored_response_continues_and_store_false_keeps_nothing(base_url: str) -> None:
    first = post(base_url, "/v1/responses", {"input": "hi", "max_output_tokens": 3,
                                             **GREEDY}).json()
    second = post(base_url, "/v1/responses", {"input": "more", "max_output_tokens": 3,
                                              "previous_response_id": first["id"],
                                              **GREEDY}).json()
    prompt = f"user: hi\nassistant: {first['output'][0]['content'][0]['text']}\n" \
             "user: more\nassistant: "
    assert second["usage"]["input_tokens"] == len(prompt.encode())
    unstored = post(base_url, "/v1/responses", {"input": "hi", "max_output_tokens": 2,
                                                "store": False, **GREEDY}).json()
    refused = post(base_url, "/v1/responses", {"input": "x", "max_output_tokens": 2,
                                               "previous_response_id": unstored["id"]})
    assert refused.status_code == 400 and "no stored response" in refused.text


@pytest.mark.parametrize(("path", "body", "said"), [
    ("/v1/responses", {"max_output_tokens": 2}, "'input' is required"),
    ("/v1/responses", {"input": [{"type": "function_call"}]}, "message item"),
    ("/v1/responses", {"input": "a", "previous_response_id": 7}, "expected a string"),
    ("/v1/messages", {"messages": [{"role": "user", "content": "a"}]}, "'max_tokens'"),
    ("/v1/messages", {"max_tokens": 2, "messages": [{"role": "tool", "content": "a"}]},
     "'user' or 'assistant'"),
    ("/v1/messages/count_tokens", {"messages": "a"}, "non-empty array"),
])
def test_a_request_its_api_refuses_is_one_400(base_url: str, path: str, body: dict,
                                              said: str) -> None:
    answer = post(base_url, path, {**body, "stream": True})
    assert answer.status_code == 400 and said in answer.json()["error"]["message"]
