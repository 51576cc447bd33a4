"""The load tables of an experiment, validated: ``[load]`` (how requests are offered),
``[slo]`` (per-request objectives for goodput) and ``[search]`` (the highest rate that
meets objectives). :class:`LoadSettings` builds the load points of
:mod:`kvlab.bench.plan.schedule`; the experiment file (:mod:`kvlab.experiment`) holds
them and checks them against its workload.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kvlab.bench.plan.schedule import LoadPoint


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LoadSettings(_Strict):
    """How requests are offered (``[load]``): a sweep of load points, see bench.plan.schedule."""

    kind: Literal["sequential", "concurrency", "rate", "trace"] = "sequential"
    # users (concurrency), requests/s (rate) or replay speeds (trace: 2.0 = twice as fast)
    values: list[float] = Field(default_factory=list)
    arrival: Literal["poisson", "constant", "gamma"] = "poisson"  # rate points
    burstiness: float = Field(default=1.0, gt=0)  # gamma: 1 Poisson, < 1 bursts, > 1 even
    ramp_up_s: float | None = Field(default=None, gt=0)  # rate: from 0 to the rate over it
    max_concurrency: int | None = Field(default=None, ge=1)  # rate/trace: in-flight cap
    requests: int | None = Field(default=None, ge=1)  # per point (default: queries x reps)
    duration_s: float | None = Field(default=None, gt=0)  # per point, instead of requests
    slip_threshold_ms: float = Field(default=50.0, gt=0)  # p95 send lag above: slipped
    seed: int = 42  # poisson and gamma arrivals
    # load workers sharing each point (kvlab run --workers N): Ray actors, see bench.workers
    workers: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _consistent(self) -> LoadSettings:
        if self.kind == "sequential":
            if self.values:
                raise ValueError("values: a sequential load has no values; set kind")
            if self.workers is not None:
                raise ValueError("workers: a sequential load has one request in flight, "
                                 "which one process sends; workers share concurrency or "
                                 "rate points")
            return self
        if any(v <= 0 for v in self.values):
            raise ValueError("values: every value must be positive")
        if self.kind == "concurrency" and any(v != int(v) for v in self.values):
            raise ValueError("values: concurrency values are whole numbers of users")
        if self.requests is not None and self.duration_s is not None:
            raise ValueError("give requests or duration_s per point, not both")
        if self.max_concurrency is not None and self.kind not in ("rate", "trace"):
            raise ValueError("max_concurrency applies to rate and trace loads only")
        if self.kind != "rate" and (self.arrival != "poisson" or self.ramp_up_s is not None):
            raise ValueError("arrival and ramp_up_s shape rate loads only")
        if self.burstiness != 1.0 and self.arrival != "gamma":
            raise ValueError('burstiness shapes gamma arrivals: set arrival = "gamma"')
        if self.kind == "trace" and (self.requests is not None or self.duration_s is not None):
            raise ValueError("a trace load sends the trace's requests: no requests or "
                             "duration_s")
        if self.workers is not None and self.max_concurrency is not None \
                and self.max_concurrency < self.workers:
            raise ValueError(f"max_concurrency {self.max_concurrency} is split over the "
                             f"{self.workers} workers: give each at least one")
        return self

    def points(self, default_requests: int) -> list[LoadPoint]:
        """The sweep as load points, in the order given."""
        if self.kind == "sequential":
            return [LoadPoint()]
        return [self.point(v, default_requests) for v in self.values]

    def point(self, value: float, default_requests: int, repetition: int = 0) -> LoadPoint:
        """One load point of this load at ``value`` (``repetition`` > 0: a capacity
        search's repeat of a rate, with its own arrival seed); a trace point gets its
        times when its prompts are known (``LoadPoint.with_trace``)."""
        requests = self.requests if self.requests or self.duration_s else default_requests
        return LoadPoint(kind=self.kind, value=value, requests=requests,
                         duration_s=self.duration_s, arrival=self.arrival,
                         max_concurrency=self.max_concurrency, seed=self.seed + repetition,
                         burstiness=self.burstiness, ramp_up_s=self.ramp_up_s,
                         repetition=repetition)


class SloSettings(_Strict):
    """Service-level objectives for goodput (``[slo]``, ms); unset ones are not checked."""

    ttft_ms: float | None = Field(default=None, gt=0)
    itl_ms: float | None = Field(default=None, gt=0)
    e2e_ms: float | None = Field(default=None, gt=0)


class SearchSettings(_Strict):
    """The highest request rate at which every objective holds (``[search]``): rate
    points of ``[load]`` (arrival, requests or duration_s, max_concurrency, slip
    threshold) chosen by bisection between ``low`` and ``high`` requests/s, each run
    ``repetitions`` times; see bench.analysis.capacity. Objectives: the ``percentile``
    of TTFT, effective ITL and e2e at most the given ms, and the share of requests
    meeting every ``[slo]`` at least ``goodput`` (0.95: 95 %). A rate whose requests
    validation refused beyond ``max_refused`` (a share; 0: any refused row) is missed."""

    low: float = Field(gt=0)  # requests/s
    high: float = Field(gt=0)  # requests/s
    precision: float = Field(default=0.05, gt=0, lt=1)  # stop once (high - low) / low <= it
    repetitions: int = Field(default=2, ge=1)  # load points per rate tried
    max_rates: int = Field(default=10, ge=2)  # rates tried at most (low and high included)
    percentile: float = Field(default=95.0, gt=0, lt=100)
    ttft_ms: float | None = Field(default=None, gt=0)
    itl_ms: float | None = Field(default=None, gt=0)
    e2e_ms: float | None = Field(default=None, gt=0)
    goodput: float | None = Field(default=None, gt=0, le=1)
    max_refused: float = Field(default=0.0, ge=0, lt=1)  # share of a rate's requests

    @model_validator(mode="after")
    def _consistent(self) -> SearchSettings:
        if self.low >= self.high:
            raise ValueError(f"low {self.low:g} must be below high {self.high:g}")
        if (self.ttft_ms, self.itl_ms, self.e2e_ms, self.goodput) == (None,) * 4:
            raise ValueError("give at least one objective: ttft_ms, itl_ms, e2e_ms or goodput")
        return self
