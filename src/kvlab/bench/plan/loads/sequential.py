"""The ``sequential`` load (the default): one request after the other.

A sequential experiment has no load points: its rows go one by one, are resumed row by
row, and may alternate between modes (``order = "abba"`` or ``"interleaved"``). A
:class:`SequentialPoint` is the same thing as one point, for code that runs points.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from pydantic import model_validator

from kvlab.bench.client.endpoints import RequestSpec
from kvlab.bench.plan.loads.base import LoadTable, RecordFn, SendFn, Shard
from kvlab.bench.plan.schedule import run_sequential
from kvlab.bench.plan.workload import PreparedPrompt
from kvlab.labels import SEQUENTIAL, PointKind
from kvlab.rundir import Record, RunClock


class SequentialLoad(LoadTable):
    """``[load] kind = "sequential"``: one request in flight, rows one after another."""

    kind: Literal["sequential"] = "sequential"
    one_by_one: ClassVar[bool] = True

    @model_validator(mode="after")
    def _no_sweep(self) -> SequentialLoad:
        if self.values:
            raise ValueError("values: a sequential load has no values; set kind")
        if self.workers is not None:
            raise ValueError("workers: a sequential load has one request in flight, which "
                             "one process sends; workers share concurrency or rate points")
        return self


@dataclass(frozen=True)
class SequentialPoint:
    """``requests`` (None: every spec) sent one after the other, unlabelled."""

    kind: ClassVar[PointKind] = SEQUENTIAL
    requests: int | None = None

    @property
    def label(self) -> str | None:
        return None

    def max_in_flight(self, n_requests: int) -> int:
        return 1

    def planned_requests(self) -> int:
        return self.requests or 0

    def with_prompts(self, prompts: Sequence[PreparedPrompt]) -> SequentialPoint:
        return self

    async def run(self, specs: Sequence[RequestSpec], send: SendFn, clock: RunClock,
                  on_record: RecordFn | None = None, start_ns: int | None = None
                  ) -> list[Record]:
        n = self.requests if self.requests is not None else len(specs)
        return await run_sequential(specs[:n], send, clock, on_record, None)

    def shard(self, specs: Sequence[RequestSpec], workers: int) -> list[Shard]:
        raise ValueError("a sequential point has one request in flight; it is not sharded")

    def describe(self) -> str:
        return "one request after the other"
