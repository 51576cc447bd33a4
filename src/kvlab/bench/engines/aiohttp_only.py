"""The ``aiohttp`` engine (throwaway, to check CONTRIBUTING): in this process, every
request through aiohttp (reads stamped when their coroutine resumes) instead of kvlab's
kernel-stamped client."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from kvlab.bench.client.endpoints import Endpoint, HarnessClient, RequestSpec
from kvlab.bench.engines.engine import ClocksFn, EngineSettings
from kvlab.bench.plan.loads.base import LoadStrategy, RecordFn
from kvlab.bench.plan.schedule import run_point
from kvlab.bench.records import Record, RunClock


class AiohttpSettings(EngineSettings):
    """``aiohttp``: no load workers, aiohttp for every request."""

    kind: Literal["aiohttp"] = "aiohttp"

    def build(self) -> AiohttpEngine:
        return AiohttpEngine()

    def describe(self) -> str:
        return "aiohttp (this process, read-time stamps)"


class AiohttpEngine:
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
        return {"engine": "aiohttp"}

    async def send(self, endpoint: Endpoint, spec: RequestSpec, clock: RunClock) -> Record:
        if self._client is None:
            self._client = await HarnessClient(http_client="aiohttp").__aenter__()
        return await self._client.send(endpoint, spec, clock)

    async def run_point(self, point: LoadStrategy, specs: Sequence[RequestSpec],
                        endpoint: Endpoint, clock: RunClock, landed: RecordFn,
                        clocks: ClocksFn) -> list[Record]:
        async with HarnessClient(max_connections=point.max_in_flight(len(specs)),
                                 http_client="aiohttp") as pool:
            async def send(spec: RequestSpec) -> Record:
                return await pool.send(endpoint, spec, clock)

            return await run_point(point, specs, send, clock, landed)

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.__aexit__(None, None, None)
