"""The load strategy interface: when each request of a point is due, how many may be in
flight, and how a point is shared out over load workers.

A **load strategy** is one load point (GuideLLM's scheduling strategies answer the same
two questions): :class:`LoadStrategy` gives its label, the most requests it can have in
flight, how many requests it needs, and runs them (``run``) or shares them out over N
workers (``shard``: each worker gets a :class:`Shard`, its requests and a
:class:`PointShare` that runs them on the point's common start).

A **load kind** is one ``[load]`` table of an experiment (``kind = "..."``): a settings
class deriving :class:`LoadTable` that builds its points; :mod:`kvlab.bench.plan.loads.kinds`
lists the kinds. The mechanics every strategy shares (deadlines on the run's clock, the
closed and the open loop) are in :mod:`kvlab.bench.plan.schedule`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict, Field

from kvlab.bench.client.endpoints import RequestSpec
from kvlab.bench.plan.dataset import DatasetSettings
from kvlab.bench.plan.workload import PreparedPrompt
from kvlab.labels import PointKind
from kvlab.records import Record, RunClock

SendFn = Callable[[RequestSpec], Awaitable[Record]]
RecordFn = Callable[[Record], None]


class PointShare(Protocol):
    """What runs a point's requests (the whole point, or one worker's share of it)."""

    @property
    def label(self) -> str | None:
        """The Records' ``load`` label (None: sequential rows)."""
        ...

    def max_in_flight(self, n_requests: int) -> int:
        """The most requests it can have in flight with ``n_requests`` (sizes the pool)."""
        ...

    async def run(self, specs: Sequence[RequestSpec], send: SendFn, clock: RunClock,
                  on_record: RecordFn | None = None, start_ns: int | None = None
                  ) -> list[Record]:
        """Send ``specs`` (``send`` never raises), each stamped with the label and its
        ``t_scheduled``; ``start_ns``: the point's start on ``clock`` (default: now).
        Records come back in completion order, each also to ``on_record``."""
        ...


class LoadStrategy(PointShare, Protocol):
    """One load point: a point share that also plans its size and can be shared out."""

    kind: ClassVar[PointKind]  # the grammar of its labels (labels)

    def planned_requests(self) -> int:
        """How many requests the point needs made up front."""
        ...

    def with_prompts(self, prompts: Sequence[PreparedPrompt]) -> LoadStrategy:
        """The point as it runs with these prompts, one per request in order (a trace
        takes their arrival times); most strategies return themselves."""
        ...

    def shard(self, specs: Sequence[RequestSpec], workers: int) -> list[Shard]:
        """The point shared out over ``workers`` workers (only those with work), from
        ``specs`` in run order; ValueError where it cannot be."""
        ...

    def describe(self) -> str:
        """The point in a few words, for ``kvlab run --dry-run``."""
        ...


@dataclass(frozen=True)
class Shard:
    """One worker's share of a load point: its requests, sent in order and each
    stamped with the worker's index, and what runs them (``share``)."""

    worker: int
    specs: tuple[RequestSpec, ...]
    share: PointShare

    @property
    def label(self) -> str | None:
        return self.share.label

    def max_in_flight(self) -> int:
        """The most requests this shard can have in flight (sizes the worker's pool)."""
        return self.share.max_in_flight(len(self.specs))


def split_evenly(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` whole shares differing by at most one, largest first."""
    return [total // parts + (1 if k < total % parts else 0) for k in range(parts)]


class LoadTable(BaseModel):
    """The settings of one load kind (the ``[load]`` table).

    A subclass declares ``kind: Literal["<kind>"] = "<kind>"`` and its options, and
    builds its points with :meth:`points`. ``one_by_one``: its rows go one after another
    (no load points), are resumed row by row and may alternate between modes (``order =
    "abba"`` or ``"interleaved"``). ``sends_sessions``: it sends the turns of sessions
    (a session dataset kind), as conversations in chat messages. ``values_example``:
    what ``values`` could be, for the message that asks for them."""

    model_config = ConfigDict(extra="forbid")

    one_by_one: ClassVar[bool] = False
    sends_sessions: ClassVar[bool] = False
    values_example: ClassVar[str] = "[1, 2, 4]"

    # one point per value: users, requests/s, a replay speed... (the kind says)
    values: list[float] = Field(default_factory=list)
    slip_threshold_ms: float = Field(default=50.0, gt=0)  # p95 send lag above: slipped
    # the share of a point's median TTFT its client error may take before the point is
    # flagged (kvlab evaluate --strict refuses it): analysis.client_error
    client_error_limit: float = Field(default=0.05, gt=0, lt=1)
    # load workers sharing each point (kvlab run --workers N), see bench.drivers
    workers: int | None = Field(default=None, ge=1)

    @property
    def name(self) -> str:
        """The kind's name, as the file writes it."""
        return str(type(self).model_fields["kind"].default)

    def points(self, default_requests: int) -> Sequence[LoadStrategy]:
        """The sweep as load points, in the order given (``default_requests``: the
        requests of a point that says neither requests nor duration)."""
        return []

    def in_flight_cap(self) -> int | None:
        """A cap on requests in flight that load workers must split (None: none)."""
        return None

    def problem(self, dataset: DatasetSettings, search: bool) -> str | None:
        """What is wrong with this load in its experiment, as ``key: what to change``
        (None: nothing). ``dataset``: the experiment's (its rows may carry arrival times,
        or be the turns of sessions); ``search``: the experiment has a ``[search]``."""
        if dataset.session_turns and not self.sends_sessions:
            return ("load: the rows of a sessions dataset are turns that wait for the "
                    'previous answer; set [load] kind = "sessions"')
        if search:
            return ('search: a search picks its own rates: set [load] kind = "rate" without '
                    "values")
        if not self.values and not self.one_by_one:
            return f"load.values: a {self.name} load needs values, e.g. {self.values_example}"
        return None

    def probe(self, rate: float, default_requests: int, repetition: int) -> LoadStrategy:
        """A capacity search's point at ``rate`` requests/s (a kind a search can use)."""
        raise NotImplementedError(f"a {self.name} load has no rate points to search")

    def facts(self) -> dict[str, Any]:
        """The table's settings, those given only, for the plan."""
        return self.model_dump(mode="json", exclude_defaults=True)
