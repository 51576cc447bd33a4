"""Reading a server's /metrics around and during a load point into gauges.jsonl."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from kvlab.bench.client.gauges import GaugeRecorder, parse_prometheus
from kvlab.bench.records import RunClock, read_gauges
from kvlab.report.plots import gauges_over_time
from kvlab.serve import BackgroundServer, ServeSettings, create_app
from tests.ports import refusing_url
from tests.serve.conftest import wait_ready


def test_prometheus_text_becomes_samples() -> None:
    text = ('# HELP kvlab:num_requests_running x\n# TYPE kvlab:num_requests_running gauge\n'
            'kvlab:num_requests_running{model_name="toy"} 3\n'
            'kvlab:kv_blocks_in_use{model_name="toy",window="512"} 12.5\nbroken line\n')
    assert parse_prometheus(text) == {
        'kvlab:num_requests_running{model_name="toy"}': 3.0,
        'kvlab:kv_blocks_in_use{model_name="toy",window="512"}': 12.5}


def test_gauges_are_recorded_while_a_batching_server_works(tmp_path: Path) -> None:
    path = tmp_path / "gauges.jsonl"
    settings = ServeSettings(n_ctx=512, threads=1, slots=4, kv_blocks=64)
    with BackgroundServer(create_app(settings)) as server:
        wait_ready(server.base_url)

        async def load() -> None:
            async with GaugeRecorder(server.base_url, path, RunClock(), mode="b",
                                     capacity=512, load="c=4", interval_s=0.02,
                                     start_position=7, end_position=lambda: 11), \
                    httpx.AsyncClient(timeout=60) as client:
                body = {"prompt": list(range(1, 60)), "n_predict": 200, "ignore_eos": True}
                await asyncio.gather(*(client.post(server.base_url + "/completion", json=body)
                                       for _ in range(4)))

        asyncio.run(load())
    samples = read_gauges(path)
    assert len(samples) >= 3
    assert samples[0].phase == "start" and samples[-1].phase == "end"
    assert {s.phase for s in samples[1:-1]} == {"during"}
    assert (samples[0].position, samples[-1].position) == (7, 11)
    assert {(s.mode, s.capacity, s.load) for s in samples} == {("b", 512, "c=4")}
    assert [s.t_ns for s in samples] == sorted(s.t_ns for s in samples)
    running = [v for s in samples for k, v in s.samples.items()
               if k.startswith("kvlab:num_requests_running")]
    assert max(running) >= 2  # several sequences were in the batch at once
    png = gauges_over_time(samples)
    assert png is not None and png.startswith(b"\x89PNG")


def test_a_server_without_metrics_records_nothing(tmp_path: Path) -> None:
    path = tmp_path / "gauges.jsonl"

    async def poll(url: str) -> None:  # nothing listens there: the first probe fails
        async with GaugeRecorder(url, path, RunClock(), mode="a",
                                 capacity=1, load="c=1", interval_s=0.01,
                                 start_position=0, end_position=lambda: 0):
            await asyncio.sleep(0.1)

    with refusing_url() as nowhere:
        asyncio.run(poll(nowhere))
    assert read_gauges(path) == [] and gauges_over_time([]) is None


def _counter(samples: dict[str, float], name: str) -> float:
    (value,) = [v for k, v in samples.items() if k.split("{")[0] == name]
    return value


def test_start_and_end_readings_hold_exactly_the_requests_between(tmp_path: Path) -> None:
    """kvlab serve counts a request as it finishes: the end reading, taken once the
    counters stopped moving, holds every prompt token the requests computed, and the
    start reading none of the warm-up's."""
    path = tmp_path / "gauges.jsonl"
    settings = ServeSettings(n_ctx=128, threads=1)
    with BackgroundServer(create_app(settings)) as server:
        wait_ready(server.base_url)

        def complete(prompt: list[int]) -> dict[str, Any]:
            body = {"prompt": prompt, "n_predict": 4, "ignore_eos": True,
                    "cache_prompt": False}
            return httpx.post(server.base_url + "/completion", json=body, timeout=60).json()

        complete(list(range(1, 40)))  # a warm-up, before the start reading

        async def point() -> list[dict[str, Any]]:
            async with GaugeRecorder(server.base_url, path, RunClock(), mode="a",
                                     capacity=128, load=None, interval_s=None,
                                     start_position=1, end_position=lambda: 3):
                return [await asyncio.to_thread(complete, list(range(1, n)))
                        for n in (20, 30)]

        answers = asyncio.run(point())
    start, end = read_gauges(path)  # no polling between: only the two readings
    assert (start.phase, end.phase) == ("start", "end")
    delta = (_counter(end.samples, "kvlab:prompt_tokens_total")
             - _counter(start.samples, "kvlab:prompt_tokens_total"))
    assert delta == sum(a["timings"]["prompt_n"] for a in answers) == 19 + 29
    generated = (_counter(end.samples, "kvlab:generation_tokens_total")
                 - _counter(start.samples, "kvlab:generation_tokens_total"))
    assert generated == 8


def test_an_endpoint_key_is_sent_and_never_written(tmp_path: Path) -> None:
    key = "sk-gauge-secret-123"
    settings = ServeSettings(n_ctx=64, threads=1, api_key=key)
    with BackgroundServer(create_app(settings)) as server:
        wait_ready(server.base_url)

        async def read(headers: dict[str, str], out: Path) -> None:
            async with GaugeRecorder(server.base_url + "/v1", out, RunClock(), mode="a",
                                     capacity=64, load="c=1", interval_s=0.01,
                                     start_position=0, end_position=lambda: 0,
                                     headers=headers):
                await asyncio.sleep(0.05)

        asyncio.run(read({"Authorization": f"Bearer {key}"}, tmp_path / "with.jsonl"))
        asyncio.run(read({}, tmp_path / "without.jsonl"))  # 401: nothing recorded
    kept = read_gauges(tmp_path / "with.jsonl")
    assert kept and kept[0].phase == "start" and kept[-1].phase == "end"
    assert key not in (tmp_path / "with.jsonl").read_text()
    assert read_gauges(tmp_path / "without.jsonl") == []
