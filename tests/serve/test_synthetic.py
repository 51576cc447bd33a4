"""The synthetic server over loopback: schedule honoured, send log, API shapes."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Iterator

import aiohttp
import pytest

from kvlab.bench.calibrate.check import synthetic_process
from kvlab.serve.synthetic import Schedule
from tests.lateness import LatenessProbe


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with synthetic_process() as url:
        yield url


async def _stream(url: str, body: dict) -> tuple[int, list[tuple[int, bytes]]]:
    """POST and return (send time, [(arrival ns, data payload)]) for every SSE event."""
    out: list[tuple[int, bytes]] = []
    async with aiohttp.ClientSession() as session:
        t_sent = time.perf_counter_ns()
        async with session.post(url, json=body) as resp:
            assert resp.status == 200
            assert resp.headers["Content-Type"] == "text/event-stream"
            async for line in resp.content:
                if line.startswith(b"data: "):
                    out.append((time.perf_counter_ns(), line[6:].strip()))
    return t_sent, out


async def _get(url: str) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        return resp.status, await resp.json()


def test_llama_stream_follows_the_schedule(base_url: str) -> None:
    sched = {"ttft_ms": 30, "itl_ms": 20, "tokens": 10, "id": "sched-1", "echo_sends": True}
    with LatenessProbe() as probe:
        t_sent, events = asyncio.run(
            _stream(base_url + "/completion", {"prompt": "x", "stream": True, "synthetic": sched})
        )
    partial = [json.loads(d) for _, d in events[:-1]]
    final = json.loads(events[-1][1])
    assert [p["tokens_predicted"] for p in partial] == list(range(1, 11))
    assert all(len(p["tokens"]) == 1 and p["content"] for p in partial)
    assert final["stop"] is True and final["tokens_predicted"] == 10
    assert final["timings"]["predicted_n"] == 10

    _, log = asyncio.run(_get(base_url + "/synthetic/log?id=sched-1"))
    entry = log["sched-1"]
    sends = entry["send_ns"]
    assert sends == final["synthetic_send_ns"]
    assert sends == sorted(sends) and len(sends) == 10
    # Never early against the absolute deadlines; late by little: the server's wake-up
    # for each deadline, as late as this machine wakes anything.
    lateness = [s - (entry["t_recv_ns"] + 30e6 + i * 20e6) for i, s in enumerate(sends)]
    assert min(lateness) >= 0
    assert sorted(lateness)[5] < probe.allow_ms(10.0, hops=1) * 1e6, probe
    # The client sees the same schedule: TTFT >= 30 ms, gaps about 20 ms.
    arrivals = [t for t, _ in events[:-1]]
    assert arrivals[0] - t_sent >= 30e6
    # A gap moves by how late the server sent and the client read either end of it.
    gaps = sorted(b - a for a, b in itertools.pairwise(arrivals))
    slack_ns = probe.lateness_ms(hops=2) * 1e6
    assert 15e6 - slack_ns < gaps[len(gaps) // 2] < 25e6 + slack_ns, probe
    # Each arrival comes after its logged send (one clock for both processes).
    assert all(t >= s for t, s in zip(arrivals, sends, strict=True))


def test_chat_stream_shape_and_batched_writes(base_url: str) -> None:
    body = {
        "model": "synthetic", "messages": [{"role": "user", "content": "x"}], "stream": True,
        "max_tokens": 7, "stream_options": {"include_usage": True},
        "synthetic": {"ttft_ms": 0, "itl_ms": 5, "tokens_per_event": 2, "events_per_write": 2,
                      "id": "chat-1"},
    }
    _, events = asyncio.run(_stream(base_url + "/v1/chat/completions", body))
    assert events[-1][1] == b"[DONE]"
    objs = [json.loads(d) for _, d in events[:-1]]
    assert objs[0]["choices"][0]["delta"]["role"] == "assistant"
    deltas = [o["choices"][0]["delta"]["content"] for o in objs[1:5]]
    assert deltas == [" a a", " a a", " a a", " a"]  # 7 tokens, 2 per event
    assert objs[5]["choices"][0]["finish_reason"] == "length"
    assert objs[6]["choices"] == [] and objs[6]["usage"]["completion_tokens"] == 7
    _, log = asyncio.run(_get(base_url + "/synthetic/log?id=chat-1"))
    sends = log["chat-1"]["send_ns"]
    assert log["chat-1"]["tokens"] == [2, 2, 2, 1]
    assert sends[0] == sends[1] and sends[2] == sends[3] and sends[2] > sends[1]


def test_completions_stream_puts_usage_in_a_chunk_without_choices(base_url: str) -> None:
    body = {"model": "synthetic", "prompt": "x", "stream": True, "max_tokens": 3,
            "synthetic": {"ttft_ms": 0, "itl_ms": 0}}
    for include, tail in ((True, 2), (False, 1)):
        request = {**body, "stream_options": {"include_usage": include}}
        _, events = asyncio.run(_stream(base_url + "/v1/completions", request))
        objs = [json.loads(d) for _, d in events[:-1]]
        assert events[-1][1] == b"[DONE]" and len(objs) == 3 + tail
        assert objs[3]["choices"][0]["finish_reason"] == "length"
        assert all("usage" not in o for o in objs[:4])
        if include:
            assert objs[4]["choices"] == [] and objs[4]["usage"]["completion_tokens"] == 3
        assert "timings" in objs[-1]


def test_keep_alive_health_models_and_errors(base_url: str) -> None:
    async def go() -> list:
        conn = aiohttp.TCPConnector(limit=1)
        async with aiohttp.ClientSession(connector=conn) as s:
            out = []
            for _ in range(2):
                async with s.post(base_url + "/completion", json={
                        "prompt": "x", "stream": True,
                        "synthetic": {"tokens": 2, "itl_ms": 0, "ttft_ms": 0}}) as r:
                    out.append(await r.read())
            async with s.get(base_url + "/health") as r:
                out.append((r.status, await r.json()))
            async with s.get(base_url + "/v1/models") as r:
                out.append((await r.json())["data"][0]["id"])
            async with s.post(base_url + "/nope", json={}) as r:
                out.append(r.status)
            async with s.get(base_url + "/nope/v1/models") as r:
                out.append(r.status)
            async with s.post(base_url + "/completion",
                              json={"synthetic": {"tokens_per_event": 0}}) as r:
                out.append(r.status)
            out.append(len(conn._conns))  # one idle connection reused throughout
            return out

    first, second, health, model, missing, missing_get, bad, idle = asyncio.run(go())
    assert first.count(b'"stop":true') == 1 and second.count(b'"stop":true') == 1
    assert health == (200, {"status": "ok"})
    assert model == "synthetic"
    assert (missing, missing_get, bad) == (404, 404, 400)
    assert idle == 1


def test_non_streamed_answer_waits_for_the_schedule(base_url: str) -> None:
    async def go() -> tuple[float, dict]:
        async with aiohttp.ClientSession() as s:
            t = time.perf_counter()
            async with s.post(base_url + "/v1/completions", json={
                    "prompt": "x", "max_tokens": 3,
                    "synthetic": {"ttft_ms": 10, "itl_ms": 10}}) as r:
                return time.perf_counter() - t, await r.json()

    elapsed, answer = asyncio.run(go())
    assert elapsed >= 0.030
    assert answer["choices"][0]["text"] == " a a a"
    assert answer["usage"]["completion_tokens"] == 3


def test_schedule_override_uses_max_tokens_and_rejects_nonsense() -> None:
    base = Schedule(tokens=64)
    assert base.override({"n_predict": 5}).tokens == 5
    assert base.override({"max_tokens": 9, "synthetic": {"tokens": 3}}).tokens == 3
    assert base.override({"synthetic": {"tokens": 10, "tokens_per_event": 4}}).n_events == 3
    with pytest.raises(ValueError):
        base.override({"synthetic": {"itl_ms": -1}})


@pytest.mark.parametrize(("path", "body", "prefix"), [
    ("/v1/completions", {"prompt": "The tide, at dusk."}, "cmpl-"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "The tide, at dusk."}]},
     "chatcmpl-"),
])
def test_openai_ids_and_prompt_tokens_counted_from_the_prompt(base_url: str, path: str,
                                                              body: dict, prefix: str) -> None:
    import httpx

    answer = httpx.post(base_url + path, json={**body, "max_tokens": 2,
                                               "synthetic": {"ttft_ms": 0, "itl_ms": 0}}).json()
    assert answer["id"].startswith(prefix)
    # words and punctuation: "The tide , at dusk ." = 6; a chat adds "user : ... assistant :"
    assert answer["usage"]["prompt_tokens"] == (6 if prefix == "cmpl-" else 6 + 4)


@pytest.mark.parametrize("api", ["openai-responses", "anthropic-messages"])
def test_responses_and_messages_stream_on_schedule_and_read_back(base_url: str,
                                                                 api: str) -> None:
    """kvlab's client against the synthetic server in the new dialects: a chunk per
    token, the prompt counted as a chat's, the usage and terminator read."""
    from kvlab.bench.client.endpoints import Endpoint, HarnessClient, RequestSpec
    from kvlab.rundir import ApiKind, Outcome, RunClock

    endpoint = Endpoint(base_url, ApiKind(api), model="synthetic")
    spec = RequestSpec(prompt="The tide, at dusk.", max_tokens=6,
                       params={"synthetic": {"ttft_ms": 20, "itl_ms": 10}})

    async def go():  # type: ignore[no-untyped-def]
        async with HarnessClient() as client:
            return await client.send(endpoint, spec, RunClock())

    record = asyncio.run(go())
    assert record.outcome is Outcome.OK, record.error
    assert (record.output_tokens, record.prompt_tokens) == (6, 6 + 4)  # as a chat counts
    assert len(record.chunk_ns) == 6 and record.saw_terminator and record.saw_usage
