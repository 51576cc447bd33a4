"""A session's load workers (``kvlab run --workers N``): started once, used for every
load point, ended on every exit path.

The session gives each load point here instead of sending it itself: the point is
sharded over the workers (:mod:`kvlab.bench.workers.dispatch`), each worker's clock
offset is entered in the run's state (``worker_clocks``) before the point starts, and
the records come back merged in completion order to the session's ``landed`` (the run's
one writer). Warm-ups, prompt sizing, ``/metrics`` gauges and the server's life stay
with the coordinator.
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

from kvlab.bench.client.endpoints import Endpoint, RequestSpec
from kvlab.bench.plan.loads.base import LoadStrategy
from kvlab.bench.records import Record, RunClock
from kvlab.bench.store.state import PointClocks, RunState, WorkerChoice
from kvlab.bench.store.writer import RunWriter
from kvlab.bench.workers.ray_pool import RayPool, RaySettings, ray_module
from kvlab.errors import ConfigError

_LOOPBACK = ("localhost", "::1")


def worker_settings(choice: WorkerChoice | None, load_workers: int | None,
                    sequential: bool) -> RaySettings | None:
    """The workers a run uses: the command line's ``choice`` (count, address, per node;
    its count defaults to the experiment's ``[load] workers``); None for one process.
    ConfigError for a sequential load, an address without a count, and (one line, how
    to install it) when Ray is not installed."""
    count = choice.count if choice is not None and choice.count is not None else load_workers
    address = choice.address if choice is not None else None
    per_node = choice.per_node if choice is not None else None
    if count is None and per_node is None:
        if address is not None:
            raise ConfigError("--ray-address says where the load workers run; say how many: "
                              "--workers N or --workers-per-node K")
        return None
    if sequential:
        raise ConfigError("--workers shares concurrency or rate points over workers; this "
                          "experiment's load is sequential (one request in flight, which one "
                          "process sends): set [load] kind and values")
    ray_module()
    return RaySettings(workers=count, address=address, per_node=per_node)


def loopback(url: str) -> bool:
    """True when ``url``'s host is this machine only (127.0.0.0/8, ::1, localhost)."""
    host = (urlsplit(url).hostname or "").lower()
    return host in _LOOPBACK or host.startswith("127.")


class RunWorkers:
    """The load workers of one session."""

    def __init__(self, settings: RaySettings, state: RunState, writer: RunWriter) -> None:
        self.settings = settings
        self.state = state
        self.writer = writer
        self.pool: RayPool | None = None

    @property
    def facts(self) -> dict[str, Any] | None:
        """The pool's facts (engine, nodes, each worker's host and process), once started."""
        return self.pool.facts if self.pool is not None else None

    def start(self, max_concurrency: int | None) -> None:
        """Start the workers (a local Ray, or join the cluster); ConfigError when the
        load's ``max_concurrency`` cannot give each worker a place."""
        from kvlab.bench.analysis.saturation import load_calibration

        self.pool = RayPool(self.settings)
        self.pool.start()
        count = len(self.pool.handles)
        limit = load_calibration(workers=count)  # so later reports judge against the same
        if limit is not None:
            self.state.worker_calibration = limit.to_dict()
        if max_concurrency is not None and max_concurrency < count:
            raise ConfigError(f"max_concurrency {max_concurrency} is split over the {count} "
                              "load workers: give each at least one (lower --workers)")

    def check_reachable(self, endpoint: Endpoint) -> None:
        """ConfigError when a worker on another machine would send to a loopback URL."""
        here = platform.node()
        away = sorted({f["host"] for f in (self.facts or {}).get("workers", [])} - {here})
        if away and loopback(endpoint.base_url):
            raise ConfigError(
                f"{endpoint.name}: workers on {', '.join(away)} cannot reach "
                f"{urlsplit(endpoint.base_url).netloc} (this machine's loopback); measure "
                "a server at an address the workers can reach (--no-launch --endpoint, or "
                "an external endpoint)")

    async def send_point(self, mode: str, capacity: int, point: LoadStrategy,
                         specs: Sequence[RequestSpec], endpoint: Endpoint, clock: RunClock,
                         landed: Callable[[Record], None]) -> list[Record]:
        """Send one load point through the workers; its clocks go into the state first."""
        from kvlab.bench.workers.dispatch import collect, launch

        assert self.pool is not None, "start the workers first"
        self.check_reachable(endpoint)
        started = await launch(self.pool.handles, point, specs, endpoint, clock)
        clocks = self.state.worker_clocks = self.state.worker_clocks or []
        clocks.append(PointClocks(mode=mode, capacity=capacity, load=point.label or "",
                                  clocks=started.clocks()))
        self.writer.save(self.state)
        return await collect(started, clock, landed)

    def close(self) -> None:
        """End the workers (and the local Ray kvlab started); safe to call twice."""
        if self.pool is not None:
            self.pool.close()
