"""The single slot under concurrent and abandoned requests, over real HTTP."""

from __future__ import annotations

import asyncio
import json

import httpx

from kvlab.serve.slot import Timings
from tests.serve.conftest import sse_events

GREEDY = {"temperature": 0, "seed": 42, "ignore_eos": True}


async def _stream_tokens(client: httpx.AsyncClient, url: str, prompt: str) -> list[int]:
    body = {"prompt": prompt, "n_predict": 10, "stream": True, **GREEDY}
    async with client.stream("POST", url + "/completion", json=body) as response:
        assert response.status_code == 200
        events = [json.loads(e) for e in sse_events((await response.aread()).decode())]
    assert events[-1]["stop"] is True and events[-1]["tokens_predicted"] == 10
    return [e["tokens"][0] for e in events[:-1]]


def test_two_concurrent_streams_both_complete(base_url: str) -> None:
    prompts = ["first prompt", "second, longer prompt"]
    expected = [
        httpx.post(base_url + "/completion", json={"prompt": p, "n_predict": 10, **GREEDY},
                   timeout=60).json()["tokens"]
        for p in prompts
    ]

    async def both() -> list[list[int]]:
        async with httpx.AsyncClient(timeout=60) as client:
            return list(await asyncio.gather(
                *(_stream_tokens(client, base_url, p) for p in prompts),
                client.get(base_url + "/health"),
            ))[:2]

    assert asyncio.run(both()) == expected


def test_abandoned_stream_leaves_the_slot_usable(base_url: str) -> None:
    body = {"prompt": "abandon me", "n_predict": 40, "stream": True, **GREEDY}
    with httpx.stream("POST", base_url + "/completion", json=body, timeout=60) as response:
        next(response.iter_bytes())  # the first event, then hang up
    again = {"prompt": "still fine", "n_predict": 5, **GREEDY}
    first = httpx.post(base_url + "/completion", json=again, timeout=60).json()
    second = httpx.post(base_url + "/completion", json=again, timeout=60).json()
    assert first["tokens_predicted"] == 5
    assert first["tokens"] == second["tokens"]


def test_timings_follow_llamacpp_definitions() -> None:
    timings = Timings(prompt_n=10, prompt_ns=20_000_000, predicted_n=5,
                      predicted_ns=8_000_000).to_json()
    assert timings["prompt_ms"] == 20.0 and timings["prompt_per_token_ms"] == 2.0
    assert timings["prompt_per_second"] == 500.0
    assert timings["predicted_per_token_ms"] == 2.0  # 8 ms over 4 steps after the first
    assert timings["predicted_per_second"] == 500.0
    single = Timings(prompt_n=3, prompt_ns=1_000_000, predicted_n=1, predicted_ns=1000)
    assert single.to_json()["predicted_per_second"] == 0.0
