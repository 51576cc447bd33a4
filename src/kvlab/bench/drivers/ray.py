"""The Ray driver (``kvlab run --workers N``): each load point shared out over load
workers, Ray actors with kvlab's own client, started once per run and ended on every
exit path.

The point's schedule is computed once and sharded by its strategy; each worker's clock
offset is measured before the point starts (and handed to the run's state), the
records come back merged in completion order (:mod:`kvlab.bench.workers.dispatch`).
Warm-ups and sequential rows are sent by the coordinator itself, as in one process.
By default a local Ray is started and stopped; ``address`` joins a cluster and leaves
it running (``per_node`` workers on each alive node, else spread by Ray).
"""

from __future__ import annotations

import platform
from collections.abc import Sequence
from typing import Any, Literal
from urllib.parse import urlsplit

from kvlab.bench.client.endpoints import Endpoint, RequestSpec
from kvlab.bench.drivers.driver import ClocksFn, DriverSettings
from kvlab.bench.drivers.inprocess import InProcessDriver
from kvlab.bench.plan.loads.base import LoadStrategy, RecordFn
from kvlab.bench.workers.ray_pool import RayPool, RaySettings, ray_module
from kvlab.errors import ConfigError
from kvlab.records import Record, RunClock

_LOOPBACK = ("localhost", "::1")


class RayDriverSettings(DriverSettings):
    """``ray``: ``count`` load workers (None: ``per_node`` on every alive node of the
    cluster) on a local Ray, or on the cluster at ``address``."""

    kind: Literal["ray"] = "ray"
    count: int | None = None
    address: str | None = None
    per_node: int | None = None

    def pool_settings(self) -> RaySettings:
        """The pool these settings start; ConfigError (one line) for a count below 1,
        per_node without an address or neither a count nor per_node."""
        if self.count is None and self.per_node is None and self.address is not None:
            raise ConfigError("--ray-address says where the load workers run; say how many: "
                              "--workers N or --workers-per-node K")
        return RaySettings(workers=self.count, address=self.address, per_node=self.per_node)

    def with_workers(self, count: int | None) -> RayDriverSettings:
        if self.count is not None or count is None:
            return self
        return self.model_copy(update={"count": count})

    def check(self, shares_points: bool) -> None:
        self.pool_settings()
        if not shares_points:
            raise ConfigError("--workers shares concurrency or rate points over workers; "
                              "this experiment's load is sequential (one request in flight, "
                              "which one process sends): set [load] kind and values")
        ray_module()

    def build(self) -> RayDriver:
        return RayDriver(self.pool_settings())

    def describe(self) -> str:
        many = f"{self.count} load workers" if self.count is not None \
            else f"{self.per_node} load workers per node"
        return f"ray: {many} on " + (f"the cluster at {self.address}" if self.address
                                     else "a local Ray")


def loopback(url: str) -> bool:
    """True when ``url``'s host is this machine only (127.0.0.0/8, ::1, localhost)."""
    host = (urlsplit(url).hostname or "").lower()
    return host in _LOOPBACK or host.startswith("127.")


class RayDriver:
    """Load points over Ray workers; single requests from this process."""

    def __init__(self, settings: RaySettings) -> None:
        self.settings = settings
        self.pool: RayPool | None = None
        self.here = InProcessDriver()

    def start(self) -> None:
        """Start the workers (a local Ray, or join the cluster)."""
        self.pool = RayPool(self.settings)
        self.pool.start()

    def close(self) -> None:
        """End the workers (and the local Ray kvlab started); safe to call twice."""
        if self.pool is not None:
            self.pool.close()

    @property
    def workers(self) -> int | None:
        return len(self.pool.handles) if self.pool is not None else None

    def facts(self) -> dict[str, Any] | None:
        """The pool's facts (driver, nodes, each worker's host and process), once started."""
        return self.pool.facts if self.pool is not None else None

    def check_reachable(self, endpoint: Endpoint) -> None:
        """ConfigError when a worker on another machine would send to a loopback URL."""
        here = platform.node()
        away = sorted({f["host"] for f in (self.facts() or {}).get("workers", [])} - {here})
        if away and loopback(endpoint.base_url):
            raise ConfigError(
                f"{endpoint.name}: workers on {', '.join(away)} cannot reach "
                f"{urlsplit(endpoint.base_url).netloc} (this machine's loopback); measure "
                "a server at an address the workers can reach (--no-launch --endpoint, or "
                "an external endpoint)")

    async def send(self, endpoint: Endpoint, spec: RequestSpec, clock: RunClock) -> Record:
        return await self.here.send(endpoint, spec, clock)

    async def run_point(self, point: LoadStrategy, specs: Sequence[RequestSpec],
                        endpoint: Endpoint, clock: RunClock, landed: RecordFn,
                        clocks: ClocksFn) -> list[Record]:
        """Shard the point over the workers, hand their clocks over, then collect."""
        from kvlab.bench.workers.dispatch import collect, launch

        assert self.pool is not None, "start the workers first"
        self.check_reachable(endpoint)
        started = await launch(self.pool.handles, point, specs, endpoint, clock)
        clocks(started.clocks())
        return await collect(started, clock, landed)

    async def aclose(self) -> None:
        await self.here.aclose()
