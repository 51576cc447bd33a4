"""The ``trace`` load (open loop): a trace's own arrival times, replayed ``values`` times
as fast (``values = [1.0, 2.0]``: as recorded, then twice as fast).

It needs a dataset whose rows carry arrival times (the ``trace`` dataset kind); each
point learns them from its prompts (``with_prompts``). Otherwise it runs as a rate
point: an optional ``max_concurrency`` cap, arrivals dealt out over load workers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from kvlab.bench.client.endpoints import RequestSpec
from kvlab.bench.plan.arrivals import trace_offsets_ns
from kvlab.bench.plan.dataset import DatasetSettings
from kvlab.bench.plan.loads.base import LoadTable, RecordFn, SendFn, Shard
from kvlab.bench.plan.schedule import OpenLoopShare, shard_open_loop
from kvlab.bench.plan.workload import PreparedPrompt
from kvlab.labels import TRACE, PointKind
from kvlab.rundir import Record, RunClock


class TraceLoad(LoadTable):
    """``[load] kind = "trace"``: replay the trace at each speed of ``values``."""

    kind: Literal["trace"] = "trace"
    values_example: ClassVar[str] = "[1.0] (the trace's own pace)"
    max_concurrency: int | None = Field(default=None, ge=1)  # in-flight cap

    @model_validator(mode="after")
    def _consistent(self) -> TraceLoad:
        if any(v <= 0 for v in self.values):
            raise ValueError("values: every value must be positive")
        if self.workers is not None and self.max_concurrency is not None \
                and self.max_concurrency < self.workers:
            raise ValueError(f"max_concurrency {self.max_concurrency} is split over the "
                             f"{self.workers} workers: give each at least one")
        return self

    def points(self, default_requests: int) -> list[TracePoint]:
        return [TracePoint(v, self.max_concurrency) for v in self.values]

    def in_flight_cap(self) -> int | None:
        return self.max_concurrency

    def problem(self, dataset: DatasetSettings, search: bool) -> str | None:
        if not search and not dataset.timed:
            return ('load: a trace load replays a trace\'s times; set [workload.dataset] '
                    'kind = "trace"')
        return super().problem(dataset, search)


@dataclass(frozen=True)
class TracePoint:
    """The arrival times ``times_ms`` (ms, in order; one request each) replayed
    ``speed`` times as fast."""

    kind: ClassVar[PointKind] = TRACE
    speed: float
    max_concurrency: int | None = None
    times_ms: tuple[float, ...] = ()
    repetition: int = 0

    def __post_init__(self) -> None:
        if self.speed <= 0:
            raise ValueError("a trace load point needs a positive value")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")

    @property
    def label(self) -> str:
        return TRACE.label(self.speed, self.repetition)

    def arrivals_ns(self, n: int | None = None) -> list[int]:
        """Send deadlines, ns from the point's start (the first ``n``; None: all)."""
        return trace_offsets_ns(self.times_ms, self.speed)[:n]

    def max_in_flight(self, n_requests: int) -> int:
        return max(1, min(self.max_concurrency or n_requests, n_requests))

    def planned_requests(self) -> int:
        return len(self.times_ms)

    def with_prompts(self, prompts: Sequence[PreparedPrompt]) -> TracePoint:
        """This point with its prompts' arrival times (ms): one request per prompt."""
        return dataclasses.replace(self, times_ms=tuple(p.arrival_ms or 0.0 for p in prompts))

    async def run(self, specs: Sequence[RequestSpec], send: SendFn, clock: RunClock,
                  on_record: RecordFn | None = None, start_ns: int | None = None
                  ) -> list[Record]:
        share = OpenLoopShare(self.label, tuple(self.arrivals_ns()), self.max_concurrency)
        return await share.run(specs, send, clock, on_record, start_ns)

    def shard(self, specs: Sequence[RequestSpec], workers: int) -> list[Shard]:
        return shard_open_loop(self.label, self.arrivals_ns(), self.max_concurrency, specs,
                               workers)

    def describe(self) -> str:
        cap = f", at most {self.max_concurrency} in flight" if self.max_concurrency else ""
        return f"the trace's times at {self.speed:g}x{cap}"
