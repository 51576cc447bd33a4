"""The in-process driver (the default): every request from this process's event loop,
through kvlab's own kernel-stamped HTTP client.

Sequential rows and warm-ups share one connection; each load point gets a pool sized to
what it can have in flight, its connections opened before its first measured request,
with the garbage collector paused while it runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from kvlab.bench.client.endpoints import Endpoint, HarnessClient, RequestSpec
from kvlab.bench.drivers.driver import ClocksFn, DriverSettings
from kvlab.bench.plan.loads.base import LoadStrategy, RecordFn
from kvlab.bench.plan.schedule import run_point
from kvlab.records import Record, RunClock


class InProcessSettings(DriverSettings):
    """``in-process``: no load workers."""

    kind: Literal["in-process"] = "in-process"

    def build(self) -> InProcessDriver:
        return InProcessDriver()

    def describe(self) -> str:
        return "in-process (this process's event loop)"


class InProcessDriver:
    """Sends from this process."""

    def __init__(self) -> None:
        self._client: HarnessClient | None = None

    def start(self) -> None:
        pass

    def close(self) -> None:
        pass

    @property
    def workers(self) -> int | None:
        return None

    def facts(self) -> dict[str, Any] | None:
        return None

    async def send(self, endpoint: Endpoint, spec: RequestSpec, clock: RunClock) -> Record:
        if self._client is None:  # opened on the run's loop, kept for every row
            self._client = await HarnessClient(max_connections=1).__aenter__()
        return await self._client.send(endpoint, spec, clock)

    async def run_point(self, point: LoadStrategy, specs: Sequence[RequestSpec],
                        endpoint: Endpoint, clock: RunClock, landed: RecordFn,
                        clocks: ClocksFn) -> list[Record]:
        in_flight = point.max_in_flight(len(specs))
        async with HarnessClient(max_connections=in_flight) as pool:
            # the point's connections opened before its measured requests: none of them
            # pays the set-up (a server that closes after each answer makes them pay)
            await pool.warm(endpoint, in_flight)

            async def send(spec: RequestSpec) -> Record:
                return await pool.send(endpoint, spec, clock)

            return await run_point(point, specs, send, clock, landed)

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.__aexit__(None, None, None)
