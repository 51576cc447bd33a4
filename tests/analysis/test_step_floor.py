"""Served ITL beside the engine's own step and the floor, per point, from the step
histograms kvlab serve writes on /metrics (rendered by its own code, read by kvlab's
parser) and vLLM's inter-token histogram."""

from __future__ import annotations

from typing import Literal

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from kvlab.analysis.step_floor import point_steps
from kvlab.bench.client.gauges import parse_prometheus
from kvlab.engine.phases import Histograms
from kvlab.report.step_floor import section_body
from kvlab.rundir import GaugeSample
from kvlab.serve.generator import Gauges, StepGauges
from kvlab.serve.metrics import render_metrics
from tests.rows import row


class FakeKvlab:
    """kvlab serve's step clock, observed by hand."""

    def __init__(self) -> None:
        self.phases = Histograms()
        self.rows = 0

    def step(self, rows: int, **phases: float) -> None:
        self.phases.observe_many({**phases, "step": sum(phases.values())})
        self.rows += rows

    def reading(self, phase: Literal["start", "end"], position: int) -> GaugeSample:
        gauges = Gauges(running=0, waiting=0, prompt_tokens=0, generation_tokens=0,
                        finished=0, steps=StepGauges(
                            phases=self.phases.snapshot(), delivery={}, rows=self.rows,
                            weight_bytes=500_000_000, copy_bandwidth=20e9))
        found = parse_prometheus(render_metrics(gauges, "gemma"))
        return GaugeSample(mode="kvlab", capacity=256, load="c=2", t_ns=position,
                           samples=found.samples, types=found.types, phase=phase,
                           position=position)


def test_a_points_step_is_its_histograms_delta_beside_the_served_itl() -> None:
    kvlab = FakeKvlab()
    kvlab.step(1, schedule=0.5, head=1.0)  # before the point: left out
    start = kvlab.reading("start", 1)
    for _ in range(4):
        kvlab.step(2, schedule=0.001, head=0.030, sample=0.009)
    end = kvlab.reading("end", 3)
    # ITL (730 - 100) / 63 = 10 ms per row, by the rows' defaults
    rows = [row(mode="kvlab", capacity=256, load="c=2", position=p) for p in (1, 2)]
    (point,) = point_steps(rows, [start, end])
    assert point.rows == 2 and point.steps == 4
    assert point.step_ms == pytest.approx(40.0)
    assert point.rows_per_step == pytest.approx(2.0)
    assert point.floor_ms == pytest.approx(25.0)  # 500 MB / 20 GB/s
    assert point.served_itl_ms == pytest.approx(10.0)
    assert point.phases_ms == pytest.approx({"schedule": 1.0, "head": 30.0, "sample": 9.0})
    assert point.step_over_floor == pytest.approx(1.6)
    assert point.served_over_step == pytest.approx(0.25)
    text = section_body([point])
    assert "| kvlab | c=2 | 2 | 10.0 | 40.0 | 2.0 | 25.0 | 0.25× | 1.60× |" in text
    assert "| kvlab | c=2 | 1.00 | 30.00 | 9.00 |" in text


def test_vllm_has_its_own_itl_and_no_floor() -> None:
    registry = CollectorRegistry()
    itl = Histogram("vllm:inter_token_latency_seconds", "ITL", ["model_name"],
                    buckets=(0.01, 0.1), registry=registry)

    def reading(phase: Literal["start", "end"], position: int) -> GaugeSample:
        found = parse_prometheus(generate_latest(registry).decode())
        return GaugeSample(mode="vllm", capacity=256, load="c=1", t_ns=position,
                           samples=found.samples, types=found.types, phase=phase,
                           position=position)

    start = reading("start", 1)
    for s in (0.02, 0.04):
        itl.labels(model_name="gemma").observe(s)
    end = reading("end", 2)
    (point,) = point_steps([row(mode="vllm", capacity=256, load="c=1", position=1)],
                           [start, end])
    assert point.server_itl_ms == pytest.approx(30.0)
    assert point.step_ms is None and point.floor_ms is None and point.phases_ms == {}


def test_a_server_without_step_histograms_has_no_row() -> None:
    bare = GaugeSample(mode="x", capacity=256, load="c=1", t_ns=0, samples={}, types={},
                       phase="start", position=0)
    end = bare.model_copy(update={"phase": "end", "position": 1})
    assert point_steps([], [bare, end]) == []
