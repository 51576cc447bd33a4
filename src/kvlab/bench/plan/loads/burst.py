"""The ``burst`` load (throwaway, to check CONTRIBUTING): ``value`` requests at once,
every ``gap_s`` seconds, until the point's requests are sent."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from pydantic import Field

from kvlab.bench.client.endpoints import RequestSpec
from kvlab.bench.labels import PointKind
from kvlab.bench.plan.loads.base import LoadTable, RecordFn, SendFn, Shard
from kvlab.bench.plan.schedule import OpenLoopShare, shard_open_loop
from kvlab.bench.plan.workload import PreparedPrompt
from kvlab.bench.records import Record, RunClock

BURST = PointKind("burst", "burst", whole=True)


class BurstLoad(LoadTable):
    """``[load] kind = "burst"``: bursts of ``values`` requests, ``gap_s`` apart."""

    kind: Literal["burst"] = "burst"
    gap_s: float = Field(default=1.0, gt=0)
    requests: int | None = Field(default=None, ge=1)

    def points(self, default_requests: int) -> list[BurstPoint]:
        return [BurstPoint(int(v), self.gap_s, self.requests or default_requests)
                for v in self.values]


@dataclass(frozen=True)
class BurstPoint:
    """``requests`` requests in bursts of ``size``, one burst every ``gap_s``."""

    kind: ClassVar[PointKind] = BURST
    size: int
    gap_s: float
    requests: int

    @property
    def label(self) -> str:
        return BURST.label(self.size)

    def arrivals_ns(self) -> list[int]:
        return [round((i // self.size) * self.gap_s * 1e9) for i in range(self.requests)]

    def max_in_flight(self, n_requests: int) -> int:
        return max(1, min(self.size, n_requests))

    def planned_requests(self) -> int:
        return self.requests

    def with_prompts(self, prompts: Sequence[PreparedPrompt]) -> BurstPoint:
        return self

    async def run(self, specs: Sequence[RequestSpec], send: SendFn, clock: RunClock,
                  on_record: RecordFn | None = None, start_ns: int | None = None
                  ) -> list[Record]:
        share = OpenLoopShare(self.label, tuple(self.arrivals_ns()))
        return await share.run(specs, send, clock, on_record, start_ns)

    def shard(self, specs: Sequence[RequestSpec], workers: int) -> list[Shard]:
        return shard_open_loop(self.label, self.arrivals_ns(), None, specs, workers)

    def describe(self) -> str:
        return f"{self.requests} requests in bursts of {self.size}, {self.gap_s:g} s apart"
