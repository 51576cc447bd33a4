"""Reading a server's /metrics around and during a load point into gauges.jsonl."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from kvlab.bench.client.gauges import GaugeRecorder, parse_prometheus
from kvlab.report.plots import gauges_over_time
from kvlab.rundir import RunClock, read_gauges
from kvlab.serve import BackgroundServer, ServeSettings, create_app
from tests.fakeserver import FakeServer
from tests.ports import refusing_url
from tests.serve.conftest import wait_ready


def test_prometheus_text_becomes_samples_with_their_types() -> None:
    text = ('# HELP kvlab:num_requests_running x\n# TYPE kvlab:num_requests_running gauge\n'
            'kvlab:num_requests_running{model_name="toy"} 3\n'
            'kvlab:kv_blocks_in_use{model_name="toy",window="512"} 12.5\n'
            '# TYPE kvlab:prompt_tokens_total counter\nkvlab:prompt_tokens_total 40\n')
    found = parse_prometheus(text)
    assert found.samples == {
        'kvlab:num_requests_running{model_name="toy"}': 3.0,
        'kvlab:kv_blocks_in_use{model_name="toy",window="512"}': 12.5,
        "kvlab:prompt_tokens_total": 40.0}
    assert found.types == {"kvlab:num_requests_running": "gauge",
                           "kvlab:kv_blocks_in_use": "unknown", "kvlab:prompt_tokens": "counter"}
    assert found.timestamps == {}


def test_a_sample_with_a_timestamp_keeps_its_value() -> None:
    """The text format allows a timestamp (ms since the epoch) after the value: the old
    hand parser split each line at its last space and took the timestamp as the value."""
    text = ('# TYPE vllm:num_requests_running gauge\n'
            'vllm:num_requests_running{model_name="m"} 2 1700000000123\n'
            'vllm:num_requests_waiting{model_name="m"} 0\n')
    found = parse_prometheus(text)
    assert found.samples == {'vllm:num_requests_running{model_name="m"}': 2.0,
                             'vllm:num_requests_waiting{model_name="m"}': 0.0}
    assert found.timestamps == {'vllm:num_requests_running{model_name="m"}': 1700000000.123}


def test_histograms_and_summaries_keep_every_sample() -> None:
    text = ('# HELP vllm:time_to_first_token_seconds TTFT\n'
            '# TYPE vllm:time_to_first_token_seconds histogram\n'
            'vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 3.0\n'
            'vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 4.0\n'
            'vllm:time_to_first_token_seconds_count{model_name="m"} 4.0\n'
            'vllm:time_to_first_token_seconds_sum{model_name="m"} 0.9\n'
            '# TYPE rpc_seconds summary\n'
            'rpc_seconds{quantile="0.5"} 0.25\nrpc_seconds_sum 3.5\nrpc_seconds_count 10\n')
    found = parse_prometheus(text)
    assert found.types == {"vllm:time_to_first_token_seconds": "histogram",
                           "rpc_seconds": "summary"}
    assert found.samples == {
        'vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="m"}': 3.0,
        'vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"}': 4.0,
        'vllm:time_to_first_token_seconds_count{model_name="m"}': 4.0,
        'vllm:time_to_first_token_seconds_sum{model_name="m"}': 0.9,
        'rpc_seconds{quantile="0.5"}': 0.25, "rpc_seconds_sum": 3.5, "rpc_seconds_count": 10.0}


def test_a_label_value_is_escaped_back_as_the_text_format_writes_it() -> None:
    text = 'x{path="a\\\\b",say="\\"hi\\"",two="1\\n2"} 1\n'
    (key,) = parse_prometheus(text).samples
    assert key == text.split(" ")[0]


def test_a_body_that_is_not_prometheus_text_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError):
        parse_prometheus("this is not metrics at all\n")


def test_an_old_gauges_file_still_reads(tmp_path: Path) -> None:
    """gauges.jsonl written before families kept their types: the same samples."""
    path = tmp_path / "gauges.jsonl"
    path.write_text('{"mode":"a","capacity":64,"load":"c=1","t_ns":5,'
                    '"samples":{"vllm:prompt_tokens_total{model_name=\\"m\\"}":12.0},'
                    '"phase":"start","position":0}\n')
    (sample,) = read_gauges(path)
    assert sample.samples == {'vllm:prompt_tokens_total{model_name="m"}': 12.0}
    assert sample.types == {} and sample.timestamps == {}


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


def test_a_metrics_body_that_is_not_prometheus_text_is_said_and_not_recorded(
        tmp_path: Path) -> None:
    path = tmp_path / "gauges.jsonl"

    async def read(url: str) -> GaugeRecorder:
        recorder = GaugeRecorder(url, path, RunClock(), mode="a", capacity=1, load="c=1",
                                 interval_s=None, start_position=0, end_position=lambda: 0)
        async with recorder:
            pass
        return recorder

    with FakeServer() as server:
        server.metrics = "requests running: 3\n"
        recorder = asyncio.run(read(server.base_url))
        assert read_gauges(path) == []
        assert recorder.problem is not None
        assert recorder.problem.startswith("/metrics is not Prometheus text (")
        server.metrics = "# TYPE x_seconds histogram\nx_seconds_bucket{le=\"+Inf\"} 1 17\n"
        assert asyncio.run(read(server.base_url)).problem is None
    start, end = read_gauges(path)
    assert (start.phase, end.phase) == ("start", "end")
    assert start.types == {"x_seconds": "histogram"}
    assert start.samples == {'x_seconds_bucket{le="+Inf"}': 1.0}
    assert start.timestamps == {'x_seconds_bucket{le="+Inf"}': 0.017}


def test_a_failed_metrics_read_at_a_points_end_is_written_with_its_error(
        tmp_path: Path) -> None:
    """The start was read, then /metrics failed (503): the end reading names the
    failure instead of vanishing, so the point's checks can say why they did not run."""
    path = tmp_path / "gauges.jsonl"

    async def read(server: FakeServer) -> None:
        async with GaugeRecorder(server.base_url, path, RunClock(), mode="a", capacity=1,
                                 load="c=1", interval_s=None, start_position=0,
                                 end_position=lambda: 2):
            server.metrics_status = 503

    with FakeServer() as server:
        server.metrics = "# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total 5\n"
        asyncio.run(read(server))
    start, end = read_gauges(path)
    assert (start.phase, start.error) == ("start", None)
    assert (end.phase, end.position, end.samples) == ("end", 2, {})
    assert end.error is not None and "503" in end.error
