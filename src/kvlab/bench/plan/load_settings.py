"""The objective tables of an experiment, validated: ``[slo]`` (per-request objectives
for goodput) and ``[search]`` (the highest rate that meets objectives). The ``[load]``
table is one of the load kinds of :mod:`kvlab.bench.plan.loads.kinds`; the experiment
file (:mod:`kvlab.experiment`) holds them and checks them against its workload.

An objective may be spelt as vLLM, GuideLLM or AIPerf spell it (``ttft``, ``tpot``,
``e2el``, ``time_to_first_token``, ``inter_token_latency``, ``request_latency``, all
in ms): each is read as the kvlab field it means (:mod:`kvlab.analysis.vocabulary`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kvlab.analysis.vocabulary import SLO_SPELLINGS


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def kvlab_spelling(data: Any) -> Any:
    """A table's keys with the peers' objective names replaced by kvlab's (ValueError
    when two names of one objective are both given)."""
    if not isinstance(data, dict):
        return data
    out: dict[str, Any] = {}
    for key, value in data.items():
        field = SLO_SPELLINGS.get(key, key) if isinstance(key, str) else key
        if field in out:
            raise ValueError(f"{key} and {field} name the same objective; give one")
        out[field] = value
    return out


class SloSettings(_Strict):
    """Service-level objectives for goodput (``[slo]``, ms); unset ones are not checked."""

    ttft_ms: float | None = Field(default=None, gt=0)
    itl_ms: float | None = Field(default=None, gt=0)
    e2e_ms: float | None = Field(default=None, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _peer_names(cls, data: Any) -> Any:
        return kvlab_spelling(data)


class SearchSettings(_Strict):
    """The highest request rate at which every objective holds (``[search]``): rate
    points of ``[load]`` (arrival, requests or duration_s, max_concurrency, slip
    threshold) chosen by bisection between ``low`` and ``high`` requests/s, each run
    ``repetitions`` times; see analysis.capacity. Objectives: the ``percentile``
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

    @model_validator(mode="before")
    @classmethod
    def _peer_names(cls, data: Any) -> Any:
        return kvlab_spelling(data)

    @model_validator(mode="after")
    def _consistent(self) -> SearchSettings:
        if self.low >= self.high:
            raise ValueError(f"low {self.low:g} must be below high {self.high:g}")
        if (self.ttft_ms, self.itl_ms, self.e2e_ms, self.goodput) == (None,) * 4:
            raise ValueError("give at least one objective: ttft_ms, itl_ms, e2e_ms or goodput")
        return self
