"""vLLM's own request histograms per load point, beside the client's view of each.

vLLM's ``/metrics`` keeps a histogram of every request it finished: its TTFT, time
queued, prefill, decode and end-to-end latency, and the gap before each token
(:data:`QUANTITIES`). Each is cumulative buckets (``_bucket{le="..."}``), ``_sum`` and
``_count``, recorded in ``gauges.jsonl`` by the ``start`` and ``end`` readings that
bracket every load point (:mod:`kvlab.bench.client.gauges`). The difference of the two
readings is the histogram of the requests the server finished during the point.

Its quantiles are read off those bucket deltas as Prometheus' ``histogram_quantile``
reads them: the bucket where the rank ``q × count`` falls, and a linear interpolation
inside it. Both are kept: the bucket's bounds are what the server knows, the
interpolated value a guess within them. The client's distribution of the same quantity
is beside it, over the point's answered requests (the ones the server counted),
validation aside: :func:`~kvlab.analysis.percentiles.percentile` of the row
metric that measures it from the client's side, where there is one.

The flag: the client's clock starts before vLLM receives a request and stops after its
first token left vLLM, so every request's client TTFT is at least vLLM's, and so is
each quantile over the same requests. A client TTFT quantile below the lower bound of
vLLM's bucket at that quantile means the client's clock or its stream parse is wrong
(a parse that took an event without a token for the first token). A TTFT timed too
late, as reading only the answer of a reasoning stream did, passes this check.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from kvlab.analysis import metrics
from kvlab.analysis.percentiles import percentile
from kvlab.rundir import GaugeSample, Outcome, Record, point_spans

QUANTILES: tuple[float, ...] = (50.0, 90.0, 99.0)  # percent


def _one(value: float | None) -> list[float]:
    return [] if value is None else [value]


@dataclass(frozen=True)
class Quantity:
    """One server histogram and the client's measure of the same thing (None: the
    client cannot see it)."""

    label: str
    histogram: str  # the family's name (seconds)
    client: Callable[[Record], list[float]] | None  # ms per row (a list: gaps are many)
    client_definition: str = ""


QUANTITIES: tuple[Quantity, ...] = (
    Quantity("TTFT", "vllm:time_to_first_token_seconds",
             lambda r: _one(metrics.ttft_ms(r)), "first output token of any kind − sent"),
    Quantity("queue", "vllm:request_queue_time_seconds", None),
    Quantity("prefill", "vllm:request_prefill_time_seconds", None),
    Quantity("decode", "vllm:request_decode_time_seconds",
             lambda r: _one(metrics.decode_span_ms(r)), "last output chunk − first"),
    Quantity("end-to-end", "vllm:e2e_request_latency_seconds",
             lambda r: [metrics.e2e_ms(r)], "end − sent"),
    Quantity("inter-token", "vllm:inter_token_latency_seconds",
             metrics.inter_delta_gaps_ms, "gaps between successive output chunks"),
)


@dataclass(frozen=True)
class BucketQuantile:
    """A quantile of a histogram (ms): the bucket it lies in, ``(low, high]`` (high
    None: the +Inf bucket), and the value interpolated linearly inside it."""

    q: float  # percent
    low: float
    high: float | None
    value: float

    def to_dict(self) -> dict[str, float | None]:
        return {"q": self.q, "bucket_low_ms": self.low, "bucket_high_ms": self.high,
                "interpolated_ms": self.value}


def bucket_quantile(q: float, bounds: Sequence[float], cumulative: Sequence[float]
                    ) -> BucketQuantile | None:
    """The ``q``-th percentile of cumulative bucket counts at upper ``bounds``
    (ascending, the last +Inf), Prometheus' ``histogram_quantile`` rule: the first
    bucket lies in [0, its bound]; in the +Inf bucket the value is the highest finite
    bound. Same unit as ``bounds``; None for an empty histogram."""
    total = cumulative[-1] if cumulative else 0.0
    if total <= 0:
        return None
    rank = q / 100.0 * total
    i = next(k for k, c in enumerate(cumulative) if c >= rank)
    low = bounds[i - 1] if i > 0 else 0.0
    below = cumulative[i - 1] if i > 0 else 0.0
    if math.isinf(bounds[i]):
        return BucketQuantile(q, low, None, low)
    inside = cumulative[i] - below
    share = (rank - below) / inside if inside > 0 else 1.0
    return BucketQuantile(q, low, bounds[i], low + (bounds[i] - low) * share)


@dataclass(frozen=True)
class Histogram:
    """One server histogram over one point (times in ms) and the client's view."""

    quantity: Quantity
    count: int  # observations the server made during the point
    mean_ms: float | None  # Δ sum / Δ count
    quantiles: dict[float, BucketQuantile | None]
    client_values: int  # client values (rows, or gaps for inter-token)
    client: dict[float, float | None]  # percent -> the client's percentile, ms

    def to_dict(self) -> dict[str, Any]:
        q = self.quantity
        return {"quantity": q.label, "histogram": q.histogram, "count": self.count,
                "mean_ms": self.mean_ms,
                "quantiles": {f"p{p:g}": (b.to_dict() if b else None)
                              for p, b in self.quantiles.items()},
                "client": None if q.client is None else {
                    "definition": q.client_definition, "values": self.client_values,
                    **{f"p{p:g}_ms": v for p, v in self.client.items()}}}


@dataclass
class PointHistograms:
    """Every known server histogram of one point, and the flags raised on it."""

    mode: str
    capacity: int
    load: str | None
    rows: int  # answered requests of the point (the client's side)
    histograms: list[Histogram]
    flags: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "capacity": self.capacity, "load": self.load,
                "rows": self.rows, "histograms": [h.to_dict() for h in self.histograms],
                "flags": self.flags}


def _labels(key: str) -> dict[str, str]:
    """The labels of a sample key (``name{a="x"}``), read by the same parser."""
    (family,) = text_string_to_metric_families(key + " 0\n")
    return dict(family.samples[0].labels)


def _summed(samples: dict[str, float], name: str) -> float | None:
    values = [v for k, v in samples.items() if k.split("{")[0] == name]
    return sum(values) if values else None


def _buckets(samples: dict[str, float], family: str) -> dict[float, float]:
    """Cumulative count per upper bound, summed over the other labels' sets."""
    out: dict[float, float] = {}
    for key, value in samples.items():
        if key.split("{")[0] == family + "_bucket":
            bound = float(_labels(key)["le"])
            out[bound] = out.get(bound, 0.0) + value
    return out


def histogram_delta(start: GaugeSample, end: GaugeSample, quantity: Quantity,
                    rows: Sequence[Record]) -> Histogram | None:
    """``quantity``'s histogram between two readings, beside ``rows``' client values;
    None when the server has no such histogram or its counts went down (a restart)."""
    family = quantity.histogram
    after = _buckets(end.samples, family)
    if not after or math.inf not in after:
        return None
    before = _buckets(start.samples, family)  # absent before the first observation: 0
    bounds = sorted(after)
    cumulative = [after[b] - before.get(b, 0.0) for b in bounds]
    if any(c < 0 for c in cumulative):
        return None
    scale = 1000.0 if family.endswith("_seconds") else 1.0
    ms = [b * scale for b in bounds]
    count = cumulative[-1]
    sum_after, sum_before = _summed(end.samples, family + "_sum"), \
        _summed(start.samples, family + "_sum") or 0.0
    mean = (sum_after - sum_before) * scale / count \
        if sum_after is not None and count > 0 else None
    values = [v for r in rows for v in quantity.client(r)] if quantity.client else []
    return Histogram(quantity, int(count), mean,
                     {q: bucket_quantile(q, ms, cumulative) for q in QUANTILES},
                     len(values), {q: percentile(values, q) for q in QUANTILES})


def _ttft_flags(where: str, found: Histogram) -> list[str]:
    flags = []
    for q, server in found.quantiles.items():
        client = found.client.get(q)
        if server is not None and client is not None and client < server.low:
            top = "∞" if server.high is None else f"{server.high:.4g}"
            flags.append(
                f"{where}: the client's TTFT p{q:g} {client:.4g} ms is below vLLM's own, "
                f"which lies in ({server.low:.4g}, {top}] ms: the client's clock or its "
                "stream parse is wrong")
    return flags


def point_histograms(records: Sequence[Record], gauges: Iterable[GaugeSample]
                     ) -> list[PointHistograms]:
    """Each completed point's server histograms that the server keeps, in the order the
    points ran; points whose server keeps none of :data:`QUANTITIES` are left out.
    ``records``: all of the run's records (a point's are those sent between its two
    readings)."""
    out = []
    for start, end in point_spans(gauges):
        if start.position is None or end.position is None:
            continue
        lo, hi = start.position, end.position
        rows = [r for r in records if r.mode == start.mode and r.capacity == start.capacity
                and lo <= r.position < hi and r.outcome is Outcome.OK]
        found = [h for q in QUANTITIES if (h := histogram_delta(start, end, q, rows))]
        if not found:
            continue
        point = PointHistograms(start.mode, start.capacity, start.load, len(rows), found)
        where = f"{start.mode} @ {start.capacity} {start.load or 'sequential'}"
        for h in found:
            if h.quantity.label == "TTFT":
                point.flags += _ttft_flags(where, h)
        out.append(point)
    return out
