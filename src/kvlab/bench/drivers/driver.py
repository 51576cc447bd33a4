"""The load driver interface: what sends a run's requests, one at a time or a whole point.

The executor (:mod:`kvlab.run.executor`) hands every request of a run to one
:class:`LoadDriver`: a warm-up or a sequential row through :meth:`~LoadDriver.send`, a
load point through :meth:`~LoadDriver.run_point` (its strategy, its requests in run
order). A driver never raises for a failed request (its Record says how it failed) and
hands each Record of a point to ``landed`` as it can be written. Servers, prompts,
``/metrics`` and the run's state stay with the executor.

Each driver has one :class:`DriverSettings` class (what a run's manifest keeps to use it
again on a resume) whose :meth:`~DriverSettings.build` makes it;
:mod:`kvlab.bench.drivers.kinds` lists them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from kvlab.bench.client.endpoints import Endpoint, RequestSpec
from kvlab.bench.plan.loads.base import LoadStrategy, RecordFn
from kvlab.records import Record, RunClock

# The clocks of one sharded point's workers, for the run's state before the point starts
ClocksFn = Callable[[list[dict[str, Any]]], None]


class LoadDriver(Protocol):
    """Sends a run's requests; started before the run's event loop and closed after it."""

    def start(self) -> None:
        """Get ready (a pool of workers up); ConfigError or WorkerError if it cannot."""
        ...

    def close(self) -> None:
        """Release what :meth:`start` took; safe to call twice."""
        ...

    @property
    def workers(self) -> int | None:
        """How many load workers send the points (None: this process)."""
        ...

    def facts(self) -> dict[str, Any] | None:
        """What the manifest keeps of this driver once started (None: nothing to say)."""
        ...

    async def send(self, endpoint: Endpoint, spec: RequestSpec, clock: RunClock) -> Record:
        """Send one request (a warm-up or a sequential row) and return its Record."""
        ...

    async def run_point(self, point: LoadStrategy, specs: Sequence[RequestSpec],
                        endpoint: Endpoint, clock: RunClock, landed: RecordFn,
                        clocks: ClocksFn) -> list[Record]:
        """Send one load point whole; each Record also goes to ``landed`` as it lands,
        and the workers' clocks (if any) to ``clocks`` before the point starts."""
        ...

    async def aclose(self) -> None:
        """Close what :meth:`send` opened on the run's event loop."""
        ...


class DriverSettings(BaseModel):
    """The settings of one load driver.

    A subclass declares ``kind: Literal["<kind>"] = "<kind>"`` and its options, and makes
    its driver with :meth:`build`. The manifest keeps them (``workers``), so a resume
    uses the same driver unless told otherwise."""

    model_config = ConfigDict(extra="forbid")

    def build(self) -> LoadDriver:
        """The driver these settings describe."""
        raise NotImplementedError

    def with_workers(self, count: int | None) -> DriverSettings:
        """These settings with the experiment's ``[load] workers`` where they give no
        count of their own."""
        return self

    def check(self, shares_points: bool) -> None:
        """ConfigError when this driver cannot run the plan (before a run dir exists);
        ``shares_points``: the plan has load points (not only sequential rows)."""

    def describe(self) -> str:
        """The driver in a few words, for ``kvlab run --dry-run``."""
        return str(type(self).model_fields["kind"].default)
