"""/tokenize and /detokenize over real HTTP, in llama.cpp's and in vLLM's dialect."""

from __future__ import annotations

import httpx
import pytest

from tests.serve.conftest import N_CTX


def test_llamacpp_body_round_trip(base_url: str) -> None:
    tokens = httpx.post(base_url + "/tokenize", json={"content": "hé"}).json()["tokens"]
    assert tokens == [104, 0xC3, 0xA9]  # byte tokenizer: UTF-8 bytes
    back = httpx.post(base_url + "/detokenize", json={"tokens": tokens}).json()
    assert back == {"content": "hé", "prompt": "hé"}  # llama.cpp's key and vLLM's


def test_vllm_body_answers_as_vllm_does(base_url: str) -> None:
    """vLLM's bench serve posts {model, prompt, add_special_tokens: false} and reads
    "tokens"; kvlab's own sizing reads "count"."""
    body = {"model": "anything", "prompt": "hé", "add_special_tokens": False}
    answer = httpx.post(base_url + "/tokenize", json=body).json()
    assert answer == {"count": 3, "max_model_len": N_CTX, "tokens": [104, 0xC3, 0xA9],
                      "token_strs": None}
    strs = httpx.post(base_url + "/tokenize", json={**body, "return_token_strs": True}).json()
    assert strs["tokens"] == answer["tokens"]
    assert len(strs["token_strs"]) == 3 and strs["token_strs"][0] == "h"


def test_content_wins_when_a_client_sends_both_bodies(base_url: str) -> None:
    """kvlab's prompt sizing sends {content, prompt} so one body serves llama.cpp and
    vLLM: kvlab serve answers the llama.cpp way, as before."""
    answer = httpx.post(base_url + "/tokenize", json={"content": "ab", "prompt": "ab"})
    assert answer.json() == {"tokens": [97, 98]}


@pytest.mark.parametrize("body", [{}, {"prompt": 3}, {"content": None},
                                  {"prompt": "x", "add_special_tokens": "no"},
                                  {"content": "x", "prompt": 5}])
def test_bad_bodies_are_one_400(base_url: str, body: dict) -> None:
    answer = httpx.post(base_url + "/tokenize", json=body)
    assert answer.status_code == 400
    assert answer.json()["error"]["type"] == "invalid_request_error"
