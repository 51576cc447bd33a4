"""Polling a server's /metrics during a load point into gauges.jsonl."""

from __future__ import annotations

import asyncio
from pathlib import Path

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
                                     capacity=512, load="c=4", interval_s=0.02), \
                    httpx.AsyncClient(timeout=60) as client:
                body = {"prompt": list(range(1, 60)), "n_predict": 200, "ignore_eos": True}
                await asyncio.gather(*(client.post(server.base_url + "/completion", json=body)
                                       for _ in range(4)))

        asyncio.run(load())
    samples = read_gauges(path)
    assert len(samples) >= 3
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
                                 capacity=1, load="c=1", interval_s=0.01):
            await asyncio.sleep(0.1)

    with refusing_url() as nowhere:
        asyncio.run(poll(nowhere))
    assert read_gauges(path) == [] and gauges_over_time([]) is None
