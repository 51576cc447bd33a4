"""llama.cpp's /infill, measured end to end: the harness client against the synthetic
server, prompt sizing's usage probe, and kvlab calibrate --api llamacpp-infill."""

from __future__ import annotations

import asyncio

import httpx

from kvlab.api.dialects import ApiKind
from kvlab.bench.calibrate.server import synthetic_process
from kvlab.bench.client.endpoints import Endpoint, HarnessClient, RequestSpec
from kvlab.bench.plan.sizing import usage_counter
from kvlab.bench.records import Outcome, RunClock


def test_the_client_and_sizing_speak_infill_to_the_synthetic_server() -> None:
    async def go(url: str) -> tuple:
        endpoint = Endpoint(url, ApiKind.LLAMACPP_INFILL)
        async with HarnessClient() as client:
            spec = RequestSpec(prompt="def add(a, b):", max_tokens=6,
                               params={"synthetic": {"ttft_ms": 1, "itl_ms": 1}})
            record = await client.send(endpoint, spec, RunClock())
        async with httpx.AsyncClient() as http:
            counter = await usage_counter(http, endpoint, {})
            assert counter is not None
            return record, await counter("def add(a, b):")

    with synthetic_process() as url:
        record, counted = asyncio.run(go(url))
    assert record.outcome is Outcome.OK and record.path == "/infill", record.error
    assert len(record.chunk_ns) == 6 and record.output_tokens == 6
    assert record.prompt_tokens == counted == 8  # def add ( a , b ) :


def test_kvlab_serve_answers_infill_streamed_and_whole() -> None:
    from kvlab.serve import BackgroundServer, ServeSettings, create_app
    from tests.serve.conftest import wait_ready

    async def go(url: str) -> list:
        endpoint = Endpoint(url, ApiKind.LLAMACPP_INFILL)
        async with HarnessClient() as client:
            return [await client.send(endpoint, RequestSpec(
                prompt="Once upon", max_tokens=5, stream=stream,
                params={"ignore_eos": True}), RunClock()) for stream in (True, False)]

    with BackgroundServer(create_app(ServeSettings(n_ctx=64, threads=1))) as server:
        wait_ready(server.base_url)
        streamed, whole = asyncio.run(go(server.base_url))
    assert streamed.outcome is whole.outcome is Outcome.OK, (streamed.error, whole.error)
    assert streamed.output_tokens == whole.output_tokens == 5 == len(streamed.chunk_ns)
    assert streamed.text == whole.text and streamed.prompt_tokens == whole.prompt_tokens
