"""The ``concurrency`` load (closed loop): N users, each sending its next request as
soon as its previous one returned, so at most N requests are ever in flight.

``values`` are the user counts of the sweep's points; each point sends ``requests``
requests (default: queries x repetitions), or ``rounds`` x N requests (each of its N
users sends ``rounds``: one round is one burst of N), or its users stop taking new ones
after ``duration_s``. Over load workers the users are split as evenly as possible.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from kvlab.bench.client.endpoints import RequestSpec
from kvlab.bench.plan.loads.base import LoadTable, RecordFn, SendFn, Shard
from kvlab.bench.plan.schedule import ClosedLoopShare, shard_closed_loop
from kvlab.bench.plan.workload import PreparedPrompt
from kvlab.labels import CONCURRENCY, PointKind
from kvlab.rundir import Record, RunClock

# The requests made up front for a point that stops by time: users never need more.
BY_DURATION_REQUESTS = 5000


class ConcurrencyLoad(LoadTable):
    """``[load] kind = "concurrency"``: a sweep of closed loops of ``values`` users."""

    kind: Literal["concurrency"] = "concurrency"
    requests: int | None = Field(default=None, ge=1)  # per point (default: queries x reps)
    rounds: int | None = Field(default=None, ge=1)  # per point: rounds x N requests
    duration_s: float | None = Field(default=None, gt=0)  # per point, instead of requests

    @model_validator(mode="after")
    def _consistent(self) -> ConcurrencyLoad:
        if any(v <= 0 for v in self.values):
            raise ValueError("values: every value must be positive")
        if any(v != int(v) for v in self.values):
            raise ValueError("values: concurrency values are whole numbers of users")
        given = [k for k in ("requests", "rounds", "duration_s") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(f"give one of requests, rounds or duration_s per point, not "
                             f"{' and '.join(given)}")
        return self

    def points(self, default_requests: int) -> list[ConcurrencyPoint]:
        def requests(users: int) -> int | None:
            if self.duration_s:
                return None
            if self.rounds:
                return self.rounds * users
            return self.requests or default_requests

        return [ConcurrencyPoint(int(v), requests(int(v)), self.duration_s)
                for v in self.values]


@dataclass(frozen=True)
class ConcurrencyPoint:
    """``users`` users sharing ``requests`` requests (None: every spec, until
    ``duration_s``); ``repetition`` > 0 labels a repeat of the point."""

    kind: ClassVar[PointKind] = CONCURRENCY
    users: int
    requests: int | None = None
    duration_s: float | None = None
    repetition: int = 0

    def __post_init__(self) -> None:
        if self.users < 1:
            raise ValueError("a closed loop needs at least one user")

    @property
    def label(self) -> str:
        return CONCURRENCY.label(self.users, self.repetition)

    def max_in_flight(self, n_requests: int) -> int:
        return self.users

    def planned_requests(self) -> int:
        return self.requests if self.requests is not None else BY_DURATION_REQUESTS

    def with_prompts(self, prompts: Sequence[PreparedPrompt]) -> ConcurrencyPoint:
        return self

    def _loop(self) -> ClosedLoopShare:
        return ClosedLoopShare(self.label, self.users, self.duration_s)

    async def run(self, specs: Sequence[RequestSpec], send: SendFn, clock: RunClock,
                  on_record: RecordFn | None = None, start_ns: int | None = None
                  ) -> list[Record]:
        n = self.requests if self.requests is not None else len(specs)
        return await self._loop().run(specs[:n], send, clock, on_record, start_ns)

    def shard(self, specs: Sequence[RequestSpec], workers: int) -> list[Shard]:
        n = self.requests if self.requests is not None else len(specs)
        return shard_closed_loop(self.label, self.users, self.duration_s, specs[:n], workers)

    def describe(self) -> str:
        size = f"{self.requests} requests" if self.requests is not None \
            else f"for {self.duration_s:g} s"
        return f"{self.users} users, {size}"
