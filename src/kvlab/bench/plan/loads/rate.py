"""The ``rate`` load (open loop): arrivals at ``rate`` requests/s, whatever the server does.

Arrivals are ``poisson`` (exponential gaps, seeded, so reproducible), ``constant``
(1/rate apart) or ``gamma`` (bursts, see :mod:`kvlab.bench.plan.arrivals`), optionally
ramped up from 0 over ``ramp_up_s``. ``t_scheduled`` is the arrival time. An optional
``max_concurrency`` caps requests in flight: an arrival that finds the cap full waits,
and leaves late. Over load workers arrival ``i`` goes to worker ``i mod N``, at its
planned deadline. A capacity search probes rate points (``probe``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from kvlab.bench.client.endpoints import RequestSpec
from kvlab.bench.plan.arrivals import Arrival, rate_offsets_ns
from kvlab.bench.plan.dataset import DatasetSettings
from kvlab.bench.plan.loads.base import LoadTable, RecordFn, SendFn, Shard
from kvlab.bench.plan.schedule import OpenLoopShare, shard_open_loop
from kvlab.bench.plan.workload import PreparedPrompt
from kvlab.labels import RATE, PointKind
from kvlab.rundir import Record, RunClock


class RateLoad(LoadTable):
    """``[load] kind = "rate"``: a sweep of open loops at ``values`` requests/s."""

    kind: Literal["rate"] = "rate"
    arrival: Arrival = "poisson"
    burstiness: float = Field(default=1.0, gt=0)  # gamma: 1 Poisson, < 1 bursts, > 1 even
    ramp_up_s: float | None = Field(default=None, gt=0)  # from 0 to the rate over it
    max_concurrency: int | None = Field(default=None, ge=1)  # in-flight cap
    requests: int | None = Field(default=None, ge=1)  # per point (default: queries x reps)
    duration_s: float | None = Field(default=None, gt=0)  # per point, instead of requests
    seed: int = 42  # poisson and gamma arrivals

    @model_validator(mode="after")
    def _consistent(self) -> RateLoad:
        if any(v <= 0 for v in self.values):
            raise ValueError("values: every value must be positive")
        if self.requests is not None and self.duration_s is not None:
            raise ValueError("give requests or duration_s per point, not both")
        if self.burstiness != 1.0 and self.arrival != "gamma":
            raise ValueError('burstiness shapes gamma arrivals: set arrival = "gamma"')
        if self.workers is not None and self.max_concurrency is not None \
                and self.max_concurrency < self.workers:
            raise ValueError(f"max_concurrency {self.max_concurrency} is split over the "
                             f"{self.workers} workers: give each at least one")
        return self

    def points(self, default_requests: int) -> list[RatePoint]:
        return [self.probe(v, default_requests, 0) for v in self.values]

    def probe(self, rate: float, default_requests: int, repetition: int) -> RatePoint:
        """The point at ``rate`` (``repetition`` > 0: a capacity search's repeat of a
        rate, with its own arrival seed)."""
        requests = self.requests if self.requests or self.duration_s else default_requests
        return RatePoint(rate, requests, self.duration_s, self.arrival, self.max_concurrency,
                         self.seed + repetition, self.burstiness, self.ramp_up_s, repetition)

    def in_flight_cap(self) -> int | None:
        return self.max_concurrency

    def problem(self, dataset: DatasetSettings, search: bool) -> str | None:
        if search:
            return None if not self.values else super().problem(dataset, search)
        return super().problem(dataset, search)


@dataclass(frozen=True)
class RatePoint:
    """``requests`` arrivals at ``rate`` requests/s (None: those before ``duration_s``)."""

    kind: ClassVar[PointKind] = RATE
    rate: float
    requests: int | None = None
    duration_s: float | None = None
    arrival: Arrival = "poisson"
    max_concurrency: int | None = None
    seed: int = 42
    burstiness: float = 1.0  # gamma arrivals: the gaps' shape (1: Poisson; < 1: bursts)
    ramp_up_s: float | None = None  # rise linearly from 0 to the rate over this
    repetition: int = 0  # > 0: a repeat of the same point (a capacity search's), "#k"

    def __post_init__(self) -> None:
        if self.rate <= 0:
            raise ValueError("a rate load point needs a positive value")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        if self.burstiness <= 0:
            raise ValueError("burstiness must be positive")
        if self.ramp_up_s is not None and self.ramp_up_s <= 0:
            raise ValueError("ramp_up_s must be positive")

    @property
    def label(self) -> str:
        return RATE.label(self.rate, self.repetition)

    def arrivals_ns(self, n: int | None) -> list[int]:
        """Send deadlines, ns from the point's start: ``n`` arrivals, or those before
        ``duration_s`` when ``n`` is None. The first arrival is at 0."""
        return rate_offsets_ns(self.rate, n, self.duration_s, arrival=self.arrival,
                               burstiness=self.burstiness, seed=self.seed,
                               ramp_up_s=self.ramp_up_s)

    def max_in_flight(self, n_requests: int) -> int:
        return max(1, min(self.max_concurrency or n_requests, n_requests))

    def planned_requests(self) -> int:
        return self.requests if self.requests is not None else len(self.arrivals_ns(None))

    def with_prompts(self, prompts: Sequence[PreparedPrompt]) -> RatePoint:
        return self

    def _offsets(self, specs: Sequence[RequestSpec]) -> list[int]:
        count = self.requests if self.requests is not None or self.duration_s else len(specs)
        return self.arrivals_ns(count)

    async def run(self, specs: Sequence[RequestSpec], send: SendFn, clock: RunClock,
                  on_record: RecordFn | None = None, start_ns: int | None = None
                  ) -> list[Record]:
        share = OpenLoopShare(self.label, tuple(self._offsets(specs)), self.max_concurrency)
        return await share.run(specs, send, clock, on_record, start_ns)

    def shard(self, specs: Sequence[RequestSpec], workers: int) -> list[Shard]:
        return shard_open_loop(self.label, self._offsets(specs), self.max_concurrency, specs,
                               workers)

    def describe(self) -> str:
        size = f"{self.requests} requests" if self.requests is not None \
            else f"for {self.duration_s:g} s"
        cap = f", at most {self.max_concurrency} in flight" if self.max_concurrency else ""
        return f"{self.rate:g} req/s {self.arrival}, {size}{cap}"
