"""vLLM's request histograms over a point, beside the client's view, and the flag.

The expositions are written by prometheus_client itself (as vLLM's are), read by
kvlab's /metrics parser into gauges.jsonl samples.
"""

from __future__ import annotations

import math
from typing import Literal

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from kvlab.analysis.server_histograms import (
    QUANTITIES,
    bucket_quantile,
    point_histograms,
)
from kvlab.bench.client.gauges import parse_prometheus
from kvlab.rundir import GaugeSample, Outcome, Record
from tests.rows import MS, row

BUCKETS = (0.1, 0.25, 0.5, 1.0)  # seconds; +Inf is added by prometheus_client


class FakeVllm:
    """The TTFT histogram vLLM keeps, with vLLM's name and model label."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.ttft = Histogram("vllm:time_to_first_token_seconds", "TTFT", ["model_name"],
                              buckets=BUCKETS, registry=self.registry)

    def observe(self, *seconds: float) -> None:
        for s in seconds:
            self.ttft.labels(model_name="gemma").observe(s)

    def reading(self, phase: Literal["start", "end"], position: int) -> GaugeSample:
        found = parse_prometheus(generate_latest(self.registry).decode())
        return GaugeSample(mode="a", capacity=512, load="c=2", t_ns=position,
                           samples=found.samples, types=found.types, phase=phase,
                           position=position)


def rows_with_ttft(*ms: float, first_position: int = 1) -> list[Record]:
    return [row(position=first_position + i, load="c=2", query_id=f"q{i}",
                t_first_content=int(v * MS)) for i, v in enumerate(ms)]


def test_bucket_quantile_reads_buckets_as_histogram_quantile_does() -> None:
    bounds = [100.0, 250.0, 500.0, math.inf]
    cumulative = [2.0, 6.0, 10.0, 10.0]
    p50 = bucket_quantile(50, bounds, cumulative)
    assert p50 is not None and (p50.low, p50.high) == (100.0, 250.0)
    assert p50.value == pytest.approx(100 + 150 * (5 - 2) / 4)  # rank 5 of 10
    p10 = bucket_quantile(10, bounds, cumulative)  # first bucket: from 0
    assert p10 is not None and (p10.low, p10.high, p10.value) == (0.0, 100.0, 50.0)
    over = bucket_quantile(99, bounds, [2.0, 6.0, 8.0, 10.0])  # in +Inf: highest bound
    assert over is not None and (over.low, over.high, over.value) == (500.0, None, 500.0)
    assert bucket_quantile(50, bounds, [0.0, 0.0, 0.0, 0.0]) is None


def test_a_points_histogram_is_the_delta_of_its_two_readings() -> None:
    vllm = FakeVllm()
    vllm.observe(0.9, 0.9)  # warm-ups, before the point's start reading
    start = vllm.reading("start", 1)
    vllm.observe(0.12, 0.13, 0.2, 0.3)
    end = vllm.reading("end", 5)
    rows = rows_with_ttft(150, 160, 230, 330)  # each a little above the server's
    (point,) = point_histograms(rows, [start, end])
    (ttft,) = point.histograms
    assert (point.mode, point.capacity, point.load, point.rows) == ("a", 512, "c=2", 4)
    assert ttft.count == 4 and ttft.mean_ms == pytest.approx((0.12 + 0.13 + 0.2 + 0.3)
                                                             * 1000 / 4)
    p50 = ttft.quantiles[50]
    assert p50 is not None and (p50.low, p50.high) == (100.0, 250.0)
    assert ttft.client_values == 4
    assert ttft.client[50] == pytest.approx(195.0) and ttft.client[90] == pytest.approx(300.0)
    assert point.flags == []
    as_json = point.to_dict()["histograms"][0]
    assert as_json["quantiles"]["p50"]["bucket_low_ms"] == 100.0
    assert as_json["client"]["p50_ms"] == pytest.approx(195.0)


def test_a_client_ttft_below_the_servers_is_flagged() -> None:
    vllm = FakeVllm()
    start = vllm.reading("start", 1)
    vllm.observe(0.6, 0.7, 0.8, 0.9)
    end = vllm.reading("end", 5)
    rows = rows_with_ttft(20, 30, 40, 50)  # timed before the server's first token
    (point,) = point_histograms(rows, [start, end])
    assert len(point.flags) == 3  # p50, p90 and p99 all in (500, 1000]
    assert point.flags[0] == ("a @ 512 c=2: the client's TTFT p50 35 ms is below vLLM's "
                              "own, which lies in (500, 1000] ms: the client's clock or "
                              "its stream parse is wrong")


def test_the_points_rows_are_the_answered_ones_between_its_readings() -> None:
    vllm = FakeVllm()
    start = vllm.reading("start", 1)
    vllm.observe(0.2, 0.2)
    end = vllm.reading("end", 3)
    rows = [*rows_with_ttft(210, first_position=1),
            row(position=0, load="c=2", query_id="warm", t_first_content=1 * MS),
            row(position=2, load="c=2", query_id="cut", outcome=Outcome.DISCONNECTED,
                t_first_content=1 * MS),
            row(position=3, load="c=2", query_id="next", t_first_content=1 * MS)]
    (point,) = point_histograms(rows, [start, end])
    assert point.rows == 1 and point.histograms[0].client_values == 1


def test_a_server_without_histograms_or_a_restart_gives_none() -> None:
    plain = GaugeSample(mode="a", capacity=512, load=None, t_ns=0,
                        samples={"kvlab:prompt_tokens_total": 4.0}, phase="start", position=0)
    assert point_histograms([], [plain, plain.model_copy(update={"phase": "end"})]) == []
    vllm = FakeVllm()
    vllm.observe(0.2, 0.2, 0.2)
    start = vllm.reading("start", 0)
    restarted = FakeVllm()
    restarted.observe(0.2)
    assert point_histograms([], [start, restarted.reading("end", 1)]) == []


def test_every_quantity_is_vllms_and_says_how_the_client_sees_it() -> None:
    names = {q.histogram for q in QUANTITIES}
    assert names == {"vllm:time_to_first_token_seconds", "vllm:request_queue_time_seconds",
                     "vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds",
                     "vllm:e2e_request_latency_seconds", "vllm:inter_token_latency_seconds"}
    r = row()
    seen = {q.label: q.client(r) for q in QUANTITIES if q.client is not None}
    assert seen["TTFT"] == [100.0] and seen["end-to-end"] == [1000.0]
    assert seen["decode"] == [630.0] and seen["inter-token"] == pytest.approx([10.0] * 63)
