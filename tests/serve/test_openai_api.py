"""OpenAI-shaped routes over real HTTP: /v1/models, /v1/chat/completions, /v1/completions."""

from __future__ import annotations

import httpx

from tests.serve.conftest import N_CTX, stream_json

GREEDY = {"temperature": 0, "seed": 42, "ignore_eos": True, "cache_prompt": False}
MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
CHAT_PROMPT = "system: be brief\nuser: hi\nassistant: "  # kvlab's documented template


def test_models_lists_the_preset(base_url: str) -> None:
    models = httpx.get(base_url + "/v1/models").json()
    assert models["object"] == "list"
    (entry,) = models["data"]
    assert entry["id"] == "toy" and entry["object"] == "model"
    assert entry["owned_by"] == "kvlab"
    assert entry["meta"]["n_ctx"] == N_CTX and entry["meta"]["n_vocab"] == 256


def test_chat_uses_the_template_and_reports_usage(base_url: str) -> None:
    body = {"model": "anything", "messages": MESSAGES, "max_completion_tokens": 5, **GREEDY}
    out = httpx.post(base_url + "/v1/chat/completions", json=body, timeout=60).json()
    same = httpx.post(base_url + "/completion",
                      json={"prompt": CHAT_PROMPT, "n_predict": 5, **GREEDY}, timeout=60).json()
    assert out["object"] == "chat.completion" and out["model"] == "toy"
    (choice,) = out["choices"]
    assert choice["message"] == {"role": "assistant", "content": same["content"]}
    assert choice["finish_reason"] == "length"
    assert out["usage"]["prompt_tokens"] == len(CHAT_PROMPT.encode())
    assert out["usage"]["completion_tokens"] == 5
    assert out["usage"]["total_tokens"] == len(CHAT_PROMPT.encode()) + 5
    assert out["timings"]["predicted_n"] == 5


def test_chat_stream_shape(base_url: str) -> None:
    body = {"messages": MESSAGES, "max_tokens": 4, "stream_options": {"include_usage": True},
            **GREEDY}
    events = stream_json(base_url, "/v1/chat/completions", body)
    assert events[-1] == "[DONE]"
    first, *deltas, finish, usage, _ = events
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": None}
    assert len(deltas) == 4
    assert all(set(d["choices"][0]["delta"]) == {"content"} for d in deltas)
    assert all(d["choices"][0]["finish_reason"] is None for d in deltas)
    assert finish["choices"][0] == {"index": 0, "delta": {}, "finish_reason": "length"}
    assert "timings" not in finish
    assert usage["choices"] == []
    assert usage["usage"]["completion_tokens"] == 4
    assert usage["timings"]["predicted_n"] == 4
    assert len({e["id"] for e in events[:-1]}) == 1


def test_chat_stream_without_usage_puts_timings_on_the_finish_chunk(base_url: str) -> None:
    events = stream_json(base_url, "/v1/chat/completions",
                         {"messages": MESSAGES, "max_tokens": 2, **GREEDY})
    assert events[-1] == "[DONE]"
    finish = events[-2]
    assert finish["choices"][0]["finish_reason"] == "length"
    assert finish["timings"]["predicted_n"] == 2
    assert not any("usage" in e for e in events[:-1])


def test_completions_stream_ends_with_a_usage_chunk_and_done(base_url: str) -> None:
    """OpenAI's rule, which vLLM's bench client relies on: usage rides on a chunk of its
    own whose choices are empty, after the finish_reason chunk."""
    body = {"prompt": "Once", "max_tokens": 5, "stream_options": {"include_usage": True},
            **GREEDY}
    plain = httpx.post(base_url + "/v1/completions", json=body, timeout=60).json()
    assert plain["object"] == "text_completion"
    events = stream_json(base_url, "/v1/completions", body)
    assert events[-1] == "[DONE]"
    *texts, finish, usage, _ = events
    assert len(texts) == 5 and all("usage" not in t for t in [*texts, finish])
    text = "".join(t["choices"][0]["text"] for t in texts) + finish["choices"][0]["text"]
    assert text == plain["choices"][0]["text"]
    assert finish["choices"][0]["finish_reason"] == "length"
    assert usage["choices"] == [] and usage["object"] == "text_completion"
    assert usage["usage"] == plain["usage"]
    assert usage["usage"]["prompt_tokens"] == 4 and usage["usage"]["completion_tokens"] == 5
    assert usage["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}  # cache_prompt off
    assert usage["timings"]["predicted_n"] == 5


def test_completions_stream_without_include_usage_has_no_usage(base_url: str) -> None:
    events = stream_json(base_url, "/v1/completions",
                         {"prompt": "Once", "max_tokens": 3, **GREEDY})
    *texts, finish, done = events
    assert done == "[DONE]" and len(texts) == 3
    assert finish["choices"][0]["finish_reason"] == "length"
    assert finish["timings"]["predicted_n"] == 3  # timings ride on the last chunk
    assert not any("usage" in e for e in events[:-1])


def test_chat_without_messages_is_400(base_url: str) -> None:
    response = httpx.post(base_url + "/v1/chat/completions", json={"max_tokens": 2})
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_chat_truncated_at_context_end_is_length(base_url: str) -> None:
    long = "z" * (N_CTX - len("user: \nassistant: ") - 3)
    body = {"messages": [{"role": "user", "content": long}], "max_tokens": 50, **GREEDY}
    out = httpx.post(base_url + "/v1/chat/completions", json=body, timeout=60).json()
    assert out["usage"]["total_tokens"] == N_CTX
    assert out["choices"][0]["finish_reason"] == "length"
