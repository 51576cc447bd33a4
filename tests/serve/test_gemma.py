"""``kvlab serve --model gemma-3-270m`` against the real llama-server on the same GGUF.

One kvlab server (in-process, KV cache on, n_ctx 1024: past the 512-token window, so
the sliding layers' rings wrap) and one llama-server (-c 1024) are started once for
the module: loading Gemma 3 270M takes about 20 s. Token counts,
``tokens_evaluated``, ``usage``, the chat prompt and the model's description must be
llama-server's; generation stops at the model's EOS.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from kvlab.serve import BackgroundServer, ServeSettings, create_app
from tests.conftest import llama_server_missing
from tests.serve.conftest import wait_ready

_REASON = llama_server_missing()
pytestmark = [pytest.mark.llamacpp, pytest.mark.slow,
              pytest.mark.skipif(_REASON is not None, reason=_REASON or "")]
N_CTX = 1024
TEXTS = ["Hello world", "héllo wörld 日本語 🙂", "  two  spaces\n\nand lines",
         "<start_of_turn>user\nHi<end_of_turn>", "<bos>already a BOS"]
CHATS: list[list[dict[str, Any]]] = [
    [{"role": "user", "content": "Hi there"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"},
     {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "What is 2+2?"}],
    [{"role": "user", "content": [{"type": "text", "text": "Hi"},
                                  {"type": "text", "text": " there"}]}],
    [{"role": "user", "content": "naïve café\n\n 猫"}, {"role": "user", "content": "again"}],
]
EOS_PROMPT = "a<eos>b<eos>c<eos>d"  # <eos> is the 2nd most likely next token here
EOS_SEEDS = (1, 2, 19, 21)  # temperature 0.5: each samples <eos> first (p = 0.11)


@pytest.fixture(scope="module")
def kvlab_url() -> Iterator[str]:
    """kvlab serve --model gemma-3-270m -c 1024 (in-process), once per module."""
    settings = ServeSettings(model="gemma-3-270m", n_ctx=N_CTX, threads=2)
    with BackgroundServer(create_app(settings)) as server:
        wait_ready(server.base_url, timeout_s=300)
        yield server.base_url


@pytest.fixture(scope="module")
def llama_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama-server -c 1024 on the same GGUF, once per module."""
    from kvlab.servers.llamacpp import LlamaCppSettings, LlamaServer

    server = LlamaServer(LlamaCppSettings(threads=2), N_CTX)
    server.start(tmp_path_factory.mktemp("llama") / "server.log")
    try:
        yield server.base_url
    finally:
        server.stop()


def _post(url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(url + path, json=body, timeout=120)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.parametrize("text", TEXTS)
def test_tokenize_equals_llama_server(kvlab_url: str, llama_url: str, text: str) -> None:
    for extra in ({}, {"add_special": True}, {"with_pieces": True}):
        body = {"content": text, **extra}
        assert _post(kvlab_url, "/tokenize", body) == _post(llama_url, "/tokenize", body)


@pytest.mark.parametrize("text", TEXTS)
def test_vllm_tokenize_body_adds_bos_unless_told_not_to(kvlab_url: str, llama_url: str,
                                                        text: str) -> None:
    """vLLM's /tokenize adds special tokens (BOS) by default: the count a completion
    evaluates; add_special_tokens false gives llama.cpp's plain count."""
    with_bos = _post(llama_url, "/tokenize", {"content": text, "add_special": True})["tokens"]
    plain = _post(llama_url, "/tokenize", {"content": text})["tokens"]
    ours = _post(kvlab_url, "/tokenize", {"prompt": text})
    assert ours["tokens"] == with_bos and ours["count"] == len(with_bos)
    assert _post(kvlab_url, "/tokenize", {"prompt": text, "add_special_tokens": False}
                 )["tokens"] == plain


@pytest.mark.parametrize("text", TEXTS)
def test_tokens_evaluated_is_the_tokenize_count_plus_bos(kvlab_url: str, llama_url: str,
                                                         text: str) -> None:
    n_text = len(_post(llama_url, "/tokenize", {"content": text})["tokens"])
    body = {"prompt": text, "n_predict": 2, "temperature": 0, "ignore_eos": True,
            "cache_prompt": False}
    ours = _post(kvlab_url, "/completion", body)
    theirs = _post(llama_url, "/completion", body)
    assert ours["tokens_evaluated"] == theirs["tokens_evaluated"] == n_text + 1
    assert ours["tokens_predicted"] == 2 and ours["timings"]["prompt_n"] == n_text + 1
    openai = _post(kvlab_url, "/v1/completions", {**body, "max_tokens": 2})
    assert openai["usage"] == {"prompt_tokens": n_text + 1, "completion_tokens": 2,
                               "total_tokens": n_text + 3,
                               "prompt_tokens_details": {"cached_tokens": 0}}


@pytest.mark.parametrize("messages", CHATS)
def test_chat_prompt_equals_llama_server(kvlab_url: str, llama_url: str,
                                         messages: list[dict[str, Any]]) -> None:
    body = {"messages": messages}
    assert (_post(kvlab_url, "/apply-template", body)
            == _post(llama_url, "/apply-template", body))
    request = {**body, "max_tokens": 2, "temperature": 0, "cache_prompt": False}
    ours = _post(kvlab_url, "/v1/chat/completions", request)["usage"]
    theirs = _post(llama_url, "/v1/chat/completions", request)["usage"]
    assert ours["prompt_tokens"] == theirs["prompt_tokens"]
    assert ours["completion_tokens"] == theirs["completion_tokens"] == 2


def test_props_and_models_describe_the_real_model(kvlab_url: str, llama_url: str) -> None:
    ours, theirs = (httpx.get(u + "/props").json() for u in (kvlab_url, llama_url))
    for key in ("chat_template", "bos_token", "eos_token"):
        assert ours[key] == theirs[key], key
    assert ours["model_path"] == theirs["model_path"]
    assert ours["default_generation_settings"]["n_ctx"] == N_CTX
    assert ours["kvlab"]["model"] == "gemma-3-270m" and ours["kvlab"]["eos_ids"] == [1, 106]
    meta, their_meta = (httpx.get(u + "/v1/models").json()["data"][0]["meta"]
                        for u in (kvlab_url, llama_url))
    for key in ("vocab_type", "n_vocab", "n_ctx", "n_ctx_train", "n_embd", "n_params"):
        assert meta[key] == their_meta[key], key
    document = httpx.get(kvlab_url + "/openapi.json").text
    assert '"maximum": 262143' in document.replace('"maximum":262143', '"maximum": 262143')


@pytest.mark.parametrize("seed", EOS_SEEDS)
def test_generation_stops_at_eos(kvlab_url: str, seed: int) -> None:
    body = {"prompt": EOS_PROMPT, "n_predict": 4, "temperature": 0.5, "seed": seed,
            "cache_prompt": False}
    done = _post(kvlab_url, "/completion", body)
    assert done["stop_type"] == "eos" and done["tokens"] == [1]  # <eos>, counted
    assert done["tokens_predicted"] == 1 and done["content"] == ""
    chat = _post(kvlab_url, "/v1/completions", {**body, "max_tokens": 4})
    assert chat["choices"][0]["finish_reason"] == "stop"
    ignored = _post(kvlab_url, "/completion", {**body, "ignore_eos": True})
    assert ignored["stop_type"] == "limit" and ignored["tokens_predicted"] == 4


def test_a_prompt_that_fills_the_context_is_refused(kvlab_url: str) -> None:
    response = httpx.post(kvlab_url + "/completion",
                          json={"prompt": "word " * N_CTX, "n_predict": 1}, timeout=60)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "exceed_context_size_error"



def test_a_prompt_past_the_window_is_served_again_without_reuse(kvlab_url: str) -> None:
    # The rings keep only the last 512 positions, so the cached prefix of the first
    # request cannot be kept: the second recomputes it (llama.cpp does the same).
    body = {"prompt": "one two three " * 200, "n_predict": 2, "temperature": 0,
            "cache_prompt": True}
    first = _post(kvlab_url, "/completion", body)
    second = _post(kvlab_url, "/completion", body)
    assert first["tokens_evaluated"] > 512 and second["timings"]["cache_n"] == 0
    assert second["tokens"] == first["tokens"]
    short = _post(kvlab_url, "/completion", {**body, "prompt": "Hello world"})
    assert short["tokens_evaluated"] == 3
