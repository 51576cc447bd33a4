"""The ``sessions`` load: conversations and agent sessions as the unit of load.

Each point sends every session of the dataset (a session dataset kind:
``random-sessions``, ``sessions``, ``sharegpt-sessions``, ``weka``) once per
repetition. A turn leaves only when the answers it waits for have fully arrived, plus
its think time, and sends the session's history (the server's actual answers) as chat
messages (:mod:`kvlab.bench.plan.sessions.runner`); a refused turn ends its session.

- A mode with ``history = "server"`` (OpenAI Responses only) sends a turn after the
  first with only its new messages and ``previous_response_id``, the server keeping the
  conversation; a server that keeps none refuses the second turn, and the refusal
  names its error.
- ``arrival = "closed"`` (the default): ``values`` are sessions at once; each of N
  users takes the next session as soon as its last one ended (labels ``sessions=N``).
- ``arrival = "poisson"`` or ``"constant"``: ``values`` are session arrivals per
  second, seeded, whatever the server does; ``max_sessions`` caps the sessions in
  flight (labels ``session_rate=R``).

Over load workers each session stays whole on one worker.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from kvlab.bench.client.endpoints import RequestSpec
from kvlab.bench.plan.arrivals import Arrival, rate_offsets_ns
from kvlab.bench.plan.dataset import DatasetSettings
from kvlab.bench.plan.loads.base import LoadTable, RecordFn, SendFn, Shard
from kvlab.bench.plan.sessions.runner import (
    ClosedSessions,
    OpenSessions,
    SessionGraph,
    graphs_of,
    session_runs,
    shard_sessions,
)
from kvlab.bench.plan.workload import PreparedPrompt
from kvlab.labels import SESSION_RATE, SESSIONS, PointKind
from kvlab.rundir import Record, RunClock


class SessionsLoad(LoadTable):
    """``[load] kind = "sessions"``: a sweep of session counts (or session rates)."""

    kind: Literal["sessions"] = "sessions"
    sends_sessions: ClassVar[bool] = True
    values_example: ClassVar[str] = "[1, 2, 4] (sessions at once)"
    arrival: Literal["closed", "poisson", "constant"] = "closed"
    max_sessions: int | None = Field(default=None, ge=1)  # open loop: sessions in flight
    seed: int = 42  # poisson arrivals

    @model_validator(mode="after")
    def _consistent(self) -> SessionsLoad:
        if any(v <= 0 for v in self.values):
            raise ValueError("values: every value must be positive")
        if self.arrival == "closed":
            if any(v != int(v) for v in self.values):
                raise ValueError("values: a closed loop's values are whole numbers of "
                                 "sessions at once")
            if self.max_sessions is not None:
                raise ValueError('max_sessions caps an open loop: set arrival = "poisson" '
                                 'or "constant"')
        return self

    def points(self, default_requests: int) -> list[SessionsPoint | SessionRatePoint]:
        if self.arrival == "closed":
            return [SessionsPoint(int(v), default_requests) for v in self.values]
        arrival: Arrival = "constant" if self.arrival == "constant" else "poisson"
        return [SessionRatePoint(v, default_requests, arrival, self.max_sessions, self.seed)
                for v in self.values]

    def in_flight_cap(self) -> int | None:
        return self.max_sessions

    def problem(self, dataset: DatasetSettings, search: bool) -> str | None:
        if not dataset.session_turns:
            return ("load: a sessions load sends the turns of sessions; set "
                    '[workload.dataset] kind = "random-sessions", "sessions", '
                    '"sharegpt-sessions" or "weka"')
        return super().problem(dataset, search)


def _describe(graphs: Sequence[SessionGraph], requests: int) -> str:
    turns = sum(len(g.turns) for g in graphs)
    if not turns:
        return f"{requests} turns"
    return f"{len(graphs)} sessions x {requests // turns} ({requests} turns)"


@dataclass(frozen=True)
class SessionsPoint:
    """``users`` sessions at once over ``requests`` turns (every session's turns, once per
    repetition); ``graphs``: the sessions, from the prompts (:meth:`with_prompts`)."""

    kind: ClassVar[PointKind] = SESSIONS
    users: int
    requests: int
    graphs: tuple[SessionGraph, ...] = ()
    repetition: int = 0

    def __post_init__(self) -> None:
        if self.users < 1:
            raise ValueError("a sessions point needs at least one session at once")

    @property
    def label(self) -> str:
        return SESSIONS.label(self.users, self.repetition)

    def _share(self) -> ClosedSessions:
        return ClosedSessions(self.label, self.users, self.graphs)

    def max_in_flight(self, n_requests: int) -> int:
        return self._share().max_in_flight(n_requests)

    def planned_requests(self) -> int:
        return self.requests

    def with_prompts(self, prompts: Sequence[PreparedPrompt]) -> SessionsPoint:
        return dataclasses.replace(self, graphs=graphs_of(
            [p.session for p in prompts if p.session is not None]))

    async def run(self, specs: Sequence[RequestSpec], send: SendFn, clock: RunClock,
                  on_record: RecordFn | None = None, start_ns: int | None = None
                  ) -> list[Record]:
        return await self._share().run(specs, send, clock, on_record, start_ns)

    def shard(self, specs: Sequence[RequestSpec], workers: int) -> list[Shard]:
        return shard_sessions(self._share(), specs, workers)

    def describe(self) -> str:
        many = "session" if self.users == 1 else "sessions"
        return f"{self.users} {many} at once, {_describe(self.graphs, self.requests)}"


@dataclass(frozen=True)
class SessionRatePoint:
    """Session arrivals at ``rate`` sessions/s (``arrival``: poisson or constant, from
    ``seed``), at most ``max_sessions`` at once, over ``requests`` turns."""

    kind: ClassVar[PointKind] = SESSION_RATE
    rate: float
    requests: int
    arrival: Arrival = "poisson"
    max_sessions: int | None = None
    seed: int = 42
    graphs: tuple[SessionGraph, ...] = ()
    repetition: int = 0

    def __post_init__(self) -> None:
        if self.rate <= 0:
            raise ValueError("a session rate point needs a positive value")

    @property
    def label(self) -> str:
        return SESSION_RATE.label(self.rate, self.repetition)

    def _share(self, specs: Sequence[RequestSpec]) -> OpenSessions:
        runs = len(session_runs(self.graphs, specs))
        offsets = rate_offsets_ns(self.rate, runs, arrival=self.arrival, seed=self.seed)
        return OpenSessions(self.label, tuple(offsets), self.graphs, self.max_sessions)

    def max_in_flight(self, n_requests: int) -> int:
        width = max((g.width for g in self.graphs), default=1)
        turns = sum(len(g.turns) for g in self.graphs)
        runs = max(1, len(self.graphs) * (self.requests // turns) if turns else 1)
        return max(1, min(self.max_sessions or runs, runs) * width)

    def planned_requests(self) -> int:
        return self.requests

    def with_prompts(self, prompts: Sequence[PreparedPrompt]) -> SessionRatePoint:
        return dataclasses.replace(self, graphs=graphs_of(
            [p.session for p in prompts if p.session is not None]))

    async def run(self, specs: Sequence[RequestSpec], send: SendFn, clock: RunClock,
                  on_record: RecordFn | None = None, start_ns: int | None = None
                  ) -> list[Record]:
        return await self._share(specs).run(specs, send, clock, on_record, start_ns)

    def shard(self, specs: Sequence[RequestSpec], workers: int) -> list[Shard]:
        return shard_sessions(self._share(specs), specs, workers)

    def describe(self) -> str:
        cap = f", at most {self.max_sessions} at once" if self.max_sessions else ""
        return (f"{self.rate:g} sessions/s {self.arrival}{cap}, "
                f"{_describe(self.graphs, self.requests)}")
