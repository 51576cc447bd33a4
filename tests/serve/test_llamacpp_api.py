"""llama.cpp-shaped routes over real HTTP: /props, /completion."""

from __future__ import annotations

import httpx
import pytest

from tests.rounding import assert_no_near_tie
from tests.serve.conftest import N_CTX, SERVED_TOY, stream, stream_json

GREEDY = {"temperature": 0, "seed": 42, "ignore_eos": True}


def check_timings(timings: dict, n_prompt: int, n_out: int) -> None:
    """llama.cpp's definitions: rates leave out the first token."""
    assert timings["cache_n"] + timings["prompt_n"] == n_prompt
    assert timings["predicted_n"] == n_out
    assert timings["prompt_ms"] > 0
    assert timings["predicted_ms"] > 0
    assert timings["prompt_per_second"] == pytest.approx(
        1000 * timings["prompt_n"] / timings["prompt_ms"])
    assert timings["predicted_per_second"] == pytest.approx(
        1000 * (n_out - 1) / timings["predicted_ms"])
    assert timings["predicted_per_token_ms"] == pytest.approx(
        timings["predicted_ms"] / (n_out - 1))


def test_props_describe_the_slot(base_url: str) -> None:
    props = httpx.get(base_url + "/props").json()
    assert props["default_generation_settings"]["n_ctx"] == N_CTX
    assert props["total_slots"] == 1
    assert props["model_path"] == props["model_alias"] == "toy"
    assert props["build_info"].startswith("kvlab-")
    assert props["kvlab"]["preset"] == "toy"
    assert props["kvlab"]["kv_cache"] is True
    assert props["kvlab"]["concurrency"] == "serialized, one slot"


def test_plain_completion_counts_and_timings(base_url: str) -> None:
    body = {"prompt": "Hello", "n_predict": 8, **GREEDY}
    out = httpx.post(base_url + "/completion", json=body, timeout=60).json()
    assert out["stop"] is True
    assert out["tokens_predicted"] == 8 and len(out["tokens"]) == 8
    assert out["tokens_evaluated"] == 5
    assert out["stop_type"] == "limit" and out["truncated"] is False
    assert out["model"] == "toy"
    assert out["generation_settings"]["n_predict"] == 8
    check_timings(out["timings"], 5, 8)
    detok = httpx.post(base_url + "/detokenize", json={"tokens": out["tokens"]}).json()
    assert out["content"] == detok["content"]


def test_streamed_completion_matches_plain(base_url: str) -> None:
    body = {"prompt": "Hello", "max_tokens": 6, **GREEDY}  # alias of n_predict
    plain = httpx.post(base_url + "/completion", json=body, timeout=60).json()
    events = stream_json(base_url, "/completions", body)
    partials, final = events[:-1], events[-1]
    assert "[DONE]" not in events  # llama.cpp's /completion has no terminator
    assert len(partials) == 6
    assert all(e["stop"] is False and len(e["tokens"]) == 1 for e in partials)
    assert [e["tokens"][0] for e in partials] == plain["tokens"]
    assert "".join(e["content"] for e in partials) + final["content"] == plain["content"]
    assert final["stop"] is True and final["content"] == ""
    assert final["tokens_predicted"] == final["timings"]["predicted_n"] == 6
    check_timings(final["timings"], 5, 6)


def test_multibyte_character_split_across_tokens_streams_whole(base_url: str) -> None:
    # Random weights emit random bytes: find a seed whose output holds a valid
    # multi-byte UTF-8 character, then check the stream never splits it.
    for seed in range(40):
        body = {"prompt": "ab", "n_predict": 24, "temperature": 1.5, "seed": seed,
                "ignore_eos": True}
        plain = httpx.post(base_url + "/completion", json=body, timeout=60).json()
        if any(ord(c) > 0x7F and c != "\ufffd" for c in plain["content"]):
            break
    else:
        pytest.fail("no seed produced a multi-byte character")
    events = stream_json(base_url, "/completion", body)
    contents = [e["content"] for e in events[:-1]]
    assert "".join(contents) + events[-1]["content"] == plain["content"]
    assert "" in contents  # a lead byte waited for its continuation
    assert any(len(c.encode()) > 1 and c != "\ufffd" for c in contents)


def test_generation_stops_at_the_context_end(base_url: str) -> None:
    body = {"prompt": "x" * (N_CTX - 5), "n_predict": 100, **GREEDY}
    out = httpx.post(base_url + "/completion", json=body, timeout=60).json()
    assert out["tokens_predicted"] == 5  # prompt + generated == n_ctx
    assert out["truncated"] is True and out["stop_type"] == "limit"
    unlimited = httpx.post(base_url + "/completion", json={**body, "n_predict": -1},
                           timeout=60).json()
    assert unlimited["tokens"] == out["tokens"]


@pytest.mark.parametrize("streamed", [False, True])
def test_prompt_that_fills_the_context_is_400(base_url: str, streamed: bool) -> None:
    body = {"prompt": "y" * N_CTX, "n_predict": 4}
    if streamed:
        response, events = stream(base_url, "/completion", body)
        assert events == []
    else:
        response = httpx.post(base_url + "/completion", json=body)
    assert response.status_code == 400
    assert response.json() == {"error": {
        "code": 400,
        "message": f"request ({N_CTX} tokens) exceeds the available context size "
                   f"({N_CTX} tokens), try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": N_CTX,
        "n_ctx": N_CTX,
    }}


def test_eos_stops_unless_ignored(base_url: str) -> None:
    # A prompt given as token ids; search seeds for a sampled EOS (byte 0).
    for seed in range(60):
        body = {"prompt": [65, 66], "n_predict": 40, "temperature": 2.0, "seed": seed,
                "ignore_eos": True}
        ignored = httpx.post(base_url + "/completion", json=body, timeout=60).json()
        if 0 in ignored["tokens"]:
            break
    else:
        pytest.fail("no seed sampled EOS")
    cut = ignored["tokens"].index(0)
    stopped = httpx.post(base_url + "/completion", json={**body, "ignore_eos": False},
                         timeout=60).json()
    assert stopped["stop_type"] == "eos" and stopped["truncated"] is False
    assert stopped["tokens"] == ignored["tokens"][: cut + 1]  # EOS counted, like llama.cpp
    assert stopped["tokens_predicted"] == cut + 1
    assert "\x00" not in stopped["content"]


def test_no_cache_server_gives_the_same_tokens(base_url: str, no_cache_url: str) -> None:
    body = {"prompt": "The KV cache", "n_predict": 12, **GREEDY}
    assert_no_near_tie(SERVED_TOY, list(body["prompt"].encode()), 12)
    cached = httpx.post(base_url + "/completion", json=body, timeout=60).json()
    naive = httpx.post(no_cache_url + "/completion", json=body, timeout=60).json()
    assert naive["tokens"] == cached["tokens"]
    assert httpx.get(no_cache_url + "/props").json()["kvlab"]["kv_cache"] is False


def test_seed_makes_sampling_reproducible(base_url: str) -> None:
    body = {"prompt": "abc", "n_predict": 16, "temperature": 1.0, "seed": 7}
    first = httpx.post(base_url + "/completion", json=body, timeout=60).json()
    again = httpx.post(base_url + "/completion", json=body, timeout=60).json()
    other = httpx.post(base_url + "/completion", json={**body, "seed": 8}, timeout=60).json()
    assert first["tokens"] == again["tokens"]
    assert other["tokens"] != first["tokens"]


def test_cache_prompt_reuses_the_shared_prefix(base_url: str) -> None:
    first = {"prompt": "A shared prefix, then one ending", "n_predict": 6, **GREEDY}
    second = {**first, "prompt": "A shared prefix, then another"}
    httpx.post(base_url + "/completion", json=first, timeout=60)
    reused = httpx.post(base_url + "/completion", json=second, timeout=60).json()
    fresh = httpx.post(base_url + "/completion", json={**second, "cache_prompt": False},
                       timeout=60).json()
    shared = len("A shared prefix, then ")
    assert reused["timings"]["cache_n"] == shared
    assert reused["timings"]["prompt_n"] == len(second["prompt"]) - shared
    assert reused["tokens_evaluated"] == len(second["prompt"])
    assert fresh["timings"]["cache_n"] == 0
    assert_no_near_tie(SERVED_TOY, list(second["prompt"].encode()), 6)
    assert reused["tokens"] == fresh["tokens"]
    # The same prompt again: all but one token come from the cache (llama.cpp's rule).
    again = httpx.post(base_url + "/completion", json=second, timeout=60).json()
    assert again["timings"]["cache_n"] == len(second["prompt"]) - 1
    assert again["timings"]["prompt_n"] == 1
    assert again["tokens"] == fresh["tokens"]


def test_cache_prompt_continues_from_generated_tokens(base_url: str) -> None:
    first = httpx.post(base_url + "/completion",
                       json={"prompt": "continue", "n_predict": 5, **GREEDY}, timeout=60).json()
    # The cache holds the prompt plus all generated tokens but the last.
    assert first["tokens_cached"] == len("continue") + 4
    follow = {"prompt": [*b"continue", *first["tokens"], 65], "n_predict": 4, **GREEDY}
    reused = httpx.post(base_url + "/completion", json=follow, timeout=60).json()
    fresh = httpx.post(base_url + "/completion", json={**follow, "cache_prompt": False},
                       timeout=60).json()
    assert reused["timings"]["cache_n"] == len("continue") + 4
    assert_no_near_tie(SERVED_TOY, follow["prompt"], 4)
    assert reused["tokens"] == fresh["tokens"]


def test_no_cache_server_never_reuses(no_cache_url: str) -> None:
    body = {"prompt": "same prompt twice", "n_predict": 3, **GREEDY}
    for _ in range(2):
        out = httpx.post(no_cache_url + "/completion", json=body, timeout=60).json()
        assert out["timings"]["cache_n"] == 0 and out["tokens_cached"] == 0
