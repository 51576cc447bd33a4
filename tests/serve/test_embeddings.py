"""/v1/embeddings on kvlab serve: one unit vector per input, a batch that is each input
alone, the declared width, and the 400s. The real model's vectors against llama-server's
are in tests/servers/test_llamacpp_embeddings.py."""

from __future__ import annotations

import math

import httpx
import pytest

from tests.serve.conftest import N_CTX


def embed(base_url: str, body: dict) -> httpx.Response:
    return httpx.post(base_url + "/v1/embeddings", json={"model": "toy", **body}, timeout=60)


def test_one_unit_vector_per_input_of_the_declared_width(base_url: str) -> None:
    answer = embed(base_url, {"input": ["hello there", "a", "the kv cache"]}).json()
    width = httpx.get(base_url + "/v1/models").json()["data"][0]["meta"]["n_embd"]
    assert answer["object"] == "list" and [d["index"] for d in answer["data"]] == [0, 1, 2]
    for item in answer["data"]:
        vector = item["embedding"]
        assert len(vector) == width and all(math.isfinite(v) for v in vector)
        # unit length, up to float32 rounding of a sum of `width` squares
        assert abs(math.fsum(v * v for v in vector) - 1.0) < width * 2 ** -23
    # the toy tokenizes bytes, with no BOS: every input's bytes are its tokens
    assert answer["usage"]["prompt_tokens"] == len("hello there" "a" "the kv cache")


def test_a_batch_embeds_each_input_as_it_would_alone(base_url: str) -> None:
    """Right padding changes nothing of the real positions (causal attention)."""
    texts = ["a much longer input than the others", "b", "middle one"]
    batch = embed(base_url, {"input": texts}).json()["data"]
    for text, item in zip(texts, batch, strict=True):
        (alone,) = embed(base_url, {"input": text}).json()["data"]
        gap = max(abs(a - b) for a, b in zip(item["embedding"], alone["embedding"],
                                             strict=True))
        assert gap < 1e-5, text  # float32 sums in another order, same values


def test_dimensions_cuts_and_renormalizes(base_url: str) -> None:
    (item,) = embed(base_url, {"input": "hi", "dimensions": 8}).json()["data"]
    assert len(item["embedding"]) == 8
    assert abs(math.fsum(v * v for v in item["embedding"]) - 1.0) < 1e-6


@pytest.mark.parametrize(("body", "said"), [
    ({}, "'input' is required"),
    ({"input": []}, "'input' is required"),
    ({"input": "hi", "encoding_format": "base64"}, "only \"float\""),
    ({"input": "hi", "dimensions": 0}, "'dimensions'"),
    ({"input": "x" * (N_CTX + 5)}, "exceeds the available context size"),
    ({"input": [[999999]]}, "token ids must be in"),
])
def test_a_bad_request_is_one_400(base_url: str, body: dict, said: str) -> None:
    answer = embed(base_url, body)
    assert answer.status_code == 400 and said in answer.json()["error"]["message"]
