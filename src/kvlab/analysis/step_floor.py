"""One picture per step, served: the client's inter-token latency beside the engine's
own step and the memory floor, per load point.

A decode step reads every weight once, so bytes of weights / memory bandwidth is a
floor on its time; the engine's step sits above it by its kernels' inefficiency, and
the served inter-token latency sits above the step by what serving adds (scheduling,
streaming, HTTP). Each point's readings of ``/metrics`` (``gauges.jsonl``, the
``start`` and ``end`` that bracket it) give the server's side:

- kvlab serve (continuous batching) keeps a histogram of its steps and of each phase
  of them (``kvlab:step_duration_seconds``, ``kvlab:step_phase_seconds{phase}``), the
  tokens they sampled, the bytes of weights a step reads and the copy bandwidth it
  measured at load (:mod:`kvlab.serve.metrics`): the point's mean step, rows per step,
  mean time per step of each phase, and the floor;
- vLLM keeps, per token, the gap it saw between a request's tokens
  (``vllm:inter_token_latency_seconds``) and, per request, its time queued: their means
  over the point. vLLM states no floor.

The client's side is the mean effective ITL of the point's answered rows
(:func:`kvlab.analysis.metrics.itl_effective_ms`). A server with neither kind of
histogram has no row.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from kvlab.analysis import metrics
from kvlab.rundir import GaugeSample, Outcome, Record, point_spans

KVLAB_STEP = "kvlab:step_duration_seconds"
KVLAB_PHASE = "kvlab:step_phase_seconds"
KVLAB_ROWS = "kvlab:step_rows_total"
KVLAB_WEIGHTS = "kvlab:weight_bytes_per_step"
KVLAB_COPY = "kvlab:copy_bandwidth_bytes_per_second"
VLLM_ITL = "vllm:inter_token_latency_seconds"
VLLM_QUEUE = "vllm:request_queue_time_seconds"


@dataclass(frozen=True)
class PointStep:
    """One load point's step, served: times in ms (None: the server does not say)."""

    mode: str
    capacity: int
    load: str | None
    rows: int  # answered requests of the point
    served_itl_ms: float | None  # the client's mean effective ITL
    step_ms: float | None  # the server's mean step (kvlab) over the point
    steps: int  # steps the server counted during the point
    rows_per_step: float | None  # tokens sampled per step
    floor_ms: float | None  # weight bytes / copy bandwidth (kvlab)
    phases_ms: dict[str, float] = field(default_factory=dict)  # mean per step
    server_itl_ms: float | None = None  # vLLM's own mean inter-token latency
    queue_ms: float | None = None  # vLLM's mean time queued per request

    @property
    def served_over_step(self) -> float | None:
        """Served ITL / the engine's own step (1: serving adds nothing)."""
        if self.served_itl_ms is None or not self.step_ms:
            return None
        return self.served_itl_ms / self.step_ms

    @property
    def step_over_floor(self) -> float | None:
        """The engine's step / the memory floor (1: at the floor)."""
        if self.step_ms is None or not self.floor_ms:
            return None
        return self.step_ms / self.floor_ms

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "capacity": self.capacity, "load": self.load,
                "rows": self.rows, "served_itl_ms": self.served_itl_ms,
                "step_ms": self.step_ms, "steps": self.steps,
                "rows_per_step": self.rows_per_step, "floor_ms": self.floor_ms,
                "phases_ms": self.phases_ms, "server_itl_ms": self.server_itl_ms,
                "queue_ms": self.queue_ms, "served_over_step": self.served_over_step,
                "step_over_floor": self.step_over_floor}


def _split(key: str) -> tuple[str, dict[str, str]]:
    """A sample key's name and labels, read by Prometheus' own parser."""
    (family,) = text_string_to_metric_families(key + " 0\n")
    sample = family.samples[0]
    return sample.name, dict(sample.labels)


def _by_label(samples: dict[str, float], name: str, label: str | None
              ) -> dict[str, float]:
    """``name``'s values summed per value of ``label`` ("" when None or absent)."""
    out: dict[str, float] = {}
    for key, value in samples.items():
        if key.split("{")[0] != name:
            continue
        labels = _split(key)[1] if label else {}
        which = labels.get(label, "") if label else ""
        out[which] = out.get(which, 0.0) + value
    return out


def _delta(start: GaugeSample, end: GaugeSample, name: str, label: str | None = None
           ) -> dict[str, float]:
    """``name``'s growth over the point, per value of ``label``."""
    before = _by_label(start.samples, name, label)
    return {k: v - before.get(k, 0.0) for k, v in _by_label(end.samples, name, label).items()}


def _mean_ms(start: GaugeSample, end: GaugeSample, family: str, label: str | None = None
             ) -> tuple[dict[str, float], dict[str, float]]:
    """Per label value: the histogram's mean (ms) over the point, and its count."""
    sums = _delta(start, end, family + "_sum", label)
    counts = _delta(start, end, family + "_count", label)
    means = {k: 1e3 * sums.get(k, 0.0) / n for k, n in counts.items() if n > 0}
    return means, counts


def _gauge(sample: GaugeSample, name: str) -> float | None:
    values = _by_label(sample.samples, name, None)
    return values.get("")


def point_steps(records: Sequence[Record], gauges: Iterable[GaugeSample]) -> list[PointStep]:
    """Each completed point whose server keeps a step or inter-token histogram, in the
    order the points ran."""
    out = []
    for start, end in point_spans(gauges):
        if start.position is None or end.position is None:
            continue
        lo, hi = start.position, end.position
        rows = [r for r in records if r.mode == start.mode and r.capacity == start.capacity
                and lo <= r.position < hi and r.outcome is Outcome.OK]
        itls = [v for r in rows if (v := metrics.itl_effective_ms(r)) is not None]
        served = statistics.fmean(itls) if itls else None
        step, step_n = _mean_ms(start, end, KVLAB_STEP)
        vllm_itl, _ = _mean_ms(start, end, VLLM_ITL)
        if not step and not vllm_itl:
            continue
        phases, _ = _mean_ms(start, end, KVLAB_PHASE, "phase")
        n_steps = int(step_n.get("", 0))
        sampled = _delta(start, end, KVLAB_ROWS).get("")
        weights, copy = _gauge(end, KVLAB_WEIGHTS), _gauge(end, KVLAB_COPY)
        # a phase's mean is over the steps it ran in; per step of the point instead:
        per_step = {k: v * _delta(start, end, KVLAB_PHASE + "_count", "phase").get(k, 0)
                    / n_steps for k, v in phases.items()} if n_steps else {}
        queue, _ = _mean_ms(start, end, VLLM_QUEUE)
        out.append(PointStep(
            start.mode, start.capacity, start.load, len(rows), served,
            step.get(""), n_steps,
            sampled / n_steps if sampled is not None and n_steps else None,
            1e3 * weights / copy if weights and copy else None,
            per_step, vllm_itl.get(""), queue.get("")))
    return out
